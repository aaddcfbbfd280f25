/**
 * Test helpers (private): tolerance checks, fixture loading, the native
 * backend when it is built.
 *
 * @module
 */

import type { Backend } from "@libra/tensor";
import { type HostTensor, readSafetensors } from "./safetensors.ts";

/** Elementwise |a - e| <= atol + rtol |e|; the error names the worst element. */
export function assertClose(
  what: string,
  actual: ArrayLike<number>,
  expected: ArrayLike<number>,
  tol: { atol: number; rtol: number },
): void {
  if (actual.length !== expected.length) {
    throw new Error(`${what}: ${actual.length} elements, expected ${expected.length}`);
  }
  let worst = -1, worstExcess = 0;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!, e = expected[i]!;
    const excess = Math.abs(a - e) - (tol.atol + tol.rtol * Math.abs(e));
    if (!(excess <= 0) && (worst < 0 || !(excess <= worstExcess))) {
      worst = i;
      worstExcess = excess;
    }
  }
  if (worst >= 0) {
    throw new Error(
      `${what}: element ${worst} is ${actual[worst]}, expected ${
        expected[worst]
      } (atol ${tol.atol}, rtol ${tol.rtol})`,
    );
  }
}

/** A PyTorch fixture from `testdata/` (written by scripts/make_torch_fixtures.py). */
export interface Fixture {
  readonly kind: string;
  readonly config: Record<string, unknown>;
  readonly tensors: Map<string, HostTensor>;
  /** Entries under a prefix (e.g. `"param."`), with the prefix removed. */
  withPrefix(prefix: string): Map<string, HostTensor>;
  get(name: string): HostTensor;
}

const TESTDATA = new URL("./testdata/", import.meta.url);

/** Loads fixture `name` (see testdata/fixtures.json). */
export async function loadFixture(name: string): Promise<Fixture> {
  const index = JSON.parse(await Deno.readTextFile(new URL("fixtures.json", TESTDATA)));
  const entry = index.cases[name];
  if (!entry) throw new Error(`no fixture "${name}" in testdata/fixtures.json`);
  const { tensors } = await readSafetensors(new URL(entry.file, TESTDATA));
  return {
    kind: entry.kind,
    config: entry.config,
    tensors,
    withPrefix(prefix) {
      const out = new Map<string, HostTensor>();
      for (const [k, v] of tensors) if (k.startsWith(prefix)) out.set(k.slice(prefix.length), v);
      return out;
    },
    get(n) {
      const t = tensors.get(n);
      if (!t) throw new Error(`fixture ${name} has no tensor "${n}"`);
      return t;
    },
  };
}

let native: Backend | null | undefined;
let nativeReason = "";

/** The native cpu backend, or null (with {@link nativeSkipReason}) when the library is not built. */
export async function nativeBackend(): Promise<Backend | null> {
  if (native !== undefined) return native;
  try {
    const { cpuBackend } = await import("@libra/native");
    native = cpuBackend();
  } catch (e) {
    native = null;
    nativeReason = `native cpu backend unavailable (${
      (e as Error).message.split("\n")[0]
    }); run \`deno task build:native\``;
  }
  return native;
}

/** Why {@link nativeBackend} returned null. */
export function nativeSkipReason(): string {
  return nativeReason;
}
