import { backendConformance } from "./_conformance.ts";
import { MetaBackend } from "./meta_backend.ts";
import { ReferenceBackend } from "./testing/reference_backend.ts";

backendConformance("ReferenceBackend", () => new ReferenceBackend());
backendConformance("ReferenceBackend(f64)", () => new ReferenceBackend({ precision: "f64" }));
backendConformance("MetaBackend", () => new MetaBackend());
