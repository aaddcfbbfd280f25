/**
 * Finds and opens a native library: `$LIBRA_NATIVE_DIR` when set (and only
 * there), otherwise `native/build/` of the repository this package sits in.
 * Checks the ABI version. Opened libraries are cached per path.
 *
 * @module
 */

import { LibraryLoadError } from "./errors.ts";
import { ABI_VERSION, SYMBOLS } from "./symbols.ts";

/** Which library file to open. */
export type LibraryKind = "cpu" | "cpu_portable" | "cuda";

/** An opened library. */
export interface LoadedLibrary {
  readonly lib: Deno.DynamicLibrary<typeof SYMBOLS>;
  readonly path: string;
  readonly kind: LibraryKind;
}

const FILES: Record<LibraryKind, string> = {
  cpu: "libra_cpu.so",
  cpu_portable: "libra_cpu_portable.so",
  cuda: "libra_cuda.so",
};

const cache = new Map<string, LoadedLibrary>();

function buildDir(): string | null {
  const url = new URL("../../native/build/", import.meta.url);
  if (url.protocol !== "file:") return null;
  return decodeURIComponent(url.pathname).replace(/\/$/, "");
}

/** The directory a library is looked up in, or null when there is none (package not on disk). */
export function libraryDir(): { dir: string | null; fromEnv: boolean } {
  const env = Deno.env.get("LIBRA_NATIVE_DIR");
  if (env) return { dir: env.replace(/\/$/, ""), fromEnv: true };
  return { dir: buildDir(), fromEnv: false };
}

/**
 * OpenMP workers that spin after a parallel region steal the cores OpenBLAS's
 * own threads need for the sgemm that follows (conv2d: im2col, then sgemm),
 * which made conv2d 4x slower on a shared 2-core machine. libgomp reads its
 * wait policy once, when it is loaded, so the policy is set around the first
 * dlopen (unless the user chose one) and removed again so that child processes
 * (e.g. a PyTorch baseline) do not inherit it. Returns the undo function.
 */
function preferPassiveOpenMP(): () => void {
  try {
    if (!Deno.env.get("OMP_WAIT_POLICY") && !Deno.env.get("GOMP_SPINCOUNT")) {
      Deno.env.set("OMP_WAIT_POLICY", "passive");
      return () => Deno.env.delete("OMP_WAIT_POLICY");
    }
  } catch {
    // no env permission: keep libgomp's default
  }
  return () => {};
}

/** Opens a library without the cache (tests use this to see loader errors). */
export function openLibrary(kind: LibraryKind): LoadedLibrary {
  const { dir, fromEnv } = libraryDir();
  const hint = "build it with `deno task build:native` from the repository root" +
    (fromEnv ? " or point LIBRA_NATIVE_DIR at a folder holding it" : "");
  if (dir === null) {
    throw new LibraryLoadError(
      `@libra/native: ${FILES[kind]} not found: this package was not loaded from a local ` +
        `checkout (${import.meta.url}); set LIBRA_NATIVE_DIR to the folder holding the library ` +
        `(${hint})`,
      [],
    );
  }
  const path = `${dir}/${FILES[kind]}`;
  let lib: Deno.DynamicLibrary<typeof SYMBOLS>;
  const undo = kind === "cuda" ? () => {} : preferPassiveOpenMP();
  try {
    lib = Deno.dlopen(path, SYMBOLS);
  } catch (e) {
    const where = fromEnv ? `LIBRA_NATIVE_DIR=${dir}` : "the build folder";
    throw new LibraryLoadError(
      `@libra/native: could not open ${path} (from ${where}): ${(e as Error).message}; ${hint}`,
      [path],
      { cause: e },
    );
  } finally {
    undo();
  }
  const abi = lib.symbols.libra_abi_version();
  if (abi !== ABI_VERSION) {
    lib.close();
    throw new LibraryLoadError(
      `@libra/native: ${path} has ABI version ${abi}, this package needs ${ABI_VERSION}; ` +
        `rebuild with \`deno task build:native --force\``,
      [path],
    );
  }
  return { lib, path, kind };
}

/** Opens a library once per path and keeps it open for the life of the process. */
export function loadLibrary(kind: LibraryKind): LoadedLibrary {
  const { dir } = libraryDir();
  const key = `${dir}/${FILES[kind]}`;
  let l = cache.get(key);
  if (!l) {
    l = openLibrary(kind);
    cache.set(key, l);
  }
  return l;
}

/** Reads a NUL-terminated C string (empty for NULL). */
export function cString(p: Deno.PointerValue): string {
  return p === null ? "" : Deno.UnsafePointerView.getCString(p);
}
