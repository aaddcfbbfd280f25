/**
 * Bearer-token authentication. Writes need the write token (`LIBRA_API_TOKEN`); reads
 * are open unless a read token (`LIBRA_API_READ_TOKEN`) is set, in which case either
 * token reads. When no write token is configured, one is generated on first start and
 * kept in `.libra/api-token` so that restarts keep it.
 *
 * @module
 */

/** The tokens a server checks. */
export interface AuthConfig {
  /** Token that allows writes (and reads). */
  writeToken: string;
  /** Token that allows reads; null when reads are open. */
  readToken: string | null;
}

/** Compares two strings in time independent of where they differ. */
export function safeEqual(a: string, b: string): boolean {
  const x = new TextEncoder().encode(a);
  const y = new TextEncoder().encode(b);
  let diff = x.length ^ y.length;
  for (let i = 0; i < Math.max(x.length, y.length); i++) diff |= (x[i] ?? 0) ^ (y[i] ?? 0);
  return diff === 0;
}

/** The token of an `Authorization: Bearer ...` header, or null. */
export function bearer(header: string | undefined | null): string | null {
  const m = header?.match(/^Bearer\s+(\S+)\s*$/i);
  return m ? m[1]! : null;
}

/** What a presented token allows. */
export function access(config: AuthConfig, token: string | null): "write" | "read" | "none" {
  if (token !== null && safeEqual(token, config.writeToken)) return "write";
  if (config.readToken === null) return "read";
  if (token !== null && safeEqual(token, config.readToken)) return "read";
  return "none";
}

/**
 * Resolves the tokens: `LIBRA_API_TOKEN` / `LIBRA_API_READ_TOKEN` when set, else the
 * token saved in `<dataDir>/api-token`, else a new random one saved there (mode 0600)
 * and announced through `announce`.
 */
export async function loadAuth(
  opts: {
    dataDir: string;
    writeToken?: string | undefined;
    readToken?: string | undefined | null;
    announce?: (line: string) => void;
  },
): Promise<AuthConfig> {
  const readToken = opts.readToken ?? Deno.env.get("LIBRA_API_READ_TOKEN") ?? null;
  const given = opts.writeToken ?? Deno.env.get("LIBRA_API_TOKEN");
  if (given) return { writeToken: given, readToken: readToken || null };
  const file = `${opts.dataDir.replace(/\/$/, "")}/api-token`;
  try {
    const saved = (await Deno.readTextFile(file)).trim();
    if (saved) return { writeToken: saved, readToken: readToken || null };
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  const token = [...bytes].map((b) => b.toString(16).padStart(2, "0")).join("");
  await Deno.mkdir(opts.dataDir, { recursive: true });
  await Deno.writeTextFile(file, token + "\n", { mode: 0o600 });
  (opts.announce ?? console.log)(
    `libra: generated an API write token (saved in ${file}; set LIBRA_API_TOKEN to choose one):\n  ${token}`,
  );
  return { writeToken: token, readToken: readToken || null };
}
