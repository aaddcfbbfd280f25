/**
 * The server's browser-facing defences: an allowed list of `Host` names (against DNS
 * rebinding), an Origin check on every state-changing request of the pages (the forms,
 * `/login`, `/logout`), headers that forbid framing and restrict what a page may load
 * (Content-Security-Policy), and a limit on failed logins per client.
 *
 * @module
 */

import type { Context, MiddlewareHandler } from "hono";

/** Hosts a server answers by default, besides the name it is bound to. */
export const DEFAULT_ALLOWED_HOSTS: readonly string[] = ["localhost", "127.0.0.1", "[::1]"];

/**
 * The Content-Security-Policy of every response: scripts only from this origin (the
 * islands bundle; no inline script runs), no framing, forms and connections to this
 * origin only. Styles allow inline ones: the charts (Observable Plot) style their SVG
 * with `<style>` elements and attributes.
 */
export const CONTENT_SECURITY_POLICY: string = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

/** The host name of a `Host` value or URL host, lower-case, without the port. */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith("[")) return h.slice(0, h.indexOf("]") + 1);
  return h.replace(/:\d*$/, "");
}

/**
 * Answers 421 to a request whose host is not in `allowed` (`*` allows any): a page of
 * another site that resolves its own name to this server (DNS rebinding) is refused.
 */
export function allowedHosts(allowed: readonly string[]): MiddlewareHandler {
  const names = new Set(allowed.map(hostName));
  return async (c, next) => {
    if (names.has("*")) return await next();
    const host = hostName(c.req.header("host") ?? new URL(c.req.url).host);
    if (!names.has(host)) {
      return c.text(
        `host ${JSON.stringify(host)} is not served here; allowed: ${[...names].join(", ")} ` +
          "(add it with --allowed-host or LIBRA_ALLOWED_HOSTS)",
        421,
      );
    }
    await next();
  };
}

/** Sets the framing and content policies on every response. */
export const securityHeaders: MiddlewareHandler = async (c, next) => {
  await next();
  const set = (k: string, v: string) => {
    try {
      c.res.headers.set(k, v);
    } catch {
      // immutable headers (a fetched response): copy them
      c.res = new Response(c.res.body, c.res);
      c.res.headers.set(k, v);
    }
  };
  set("X-Frame-Options", "DENY");
  set("Content-Security-Policy", CONTENT_SECURITY_POLICY);
  set("X-Content-Type-Options", "nosniff");
  set("Referrer-Policy", "same-origin");
};

/**
 * Refuses (403) a state-changing request of a page sent from another origin: the host
 * of its `Origin` differs from the request's `Host`, or, without `Origin`, the browser marks it
 * `Sec-Fetch-Site: cross-site`. Requests without either (curl, scripts) pass: they
 * carry no cookies a browser would add for another site.
 */
export const sameOrigin: MiddlewareHandler = async (c, next) => {
  if (["GET", "HEAD", "OPTIONS"].includes(c.req.method)) return await next();
  const origin = c.req.header("origin");
  const own = new URL(c.req.url).origin;
  const site = c.req.header("sec-fetch-site");
  // the host decides, not the scheme: behind a TLS proxy the browser's origin is https
  const host = (c.req.header("host") ?? new URL(c.req.url).host).toLowerCase();
  let from: string | null = null;
  try {
    from = origin === undefined ? null : new URL(origin).host.toLowerCase();
  } catch { /* "null" or garbage: another origin */ }
  if ((origin !== undefined && from !== host) || (origin === undefined && site === "cross-site")) {
    return c.text(
      `cross-origin ${c.req.method} ${c.req.path} refused (Origin ${origin ?? "absent"}, ` +
        `this server is ${own})`,
      403,
    );
  }
  await next();
};

/** Options of {@linkcode LoginLimiter}. */
export interface LoginLimitOptions {
  /** Failed attempts allowed per client in the window (default 10). */
  maxFailures?: number;
  /** The window, ms (default 5 minutes). */
  windowMs?: number;
  /** Clients remembered at most (oldest forgotten first; default 10000). */
  maxClients?: number;
}

/** Counts failed logins per client and says when a client must wait. */
export class LoginLimiter {
  readonly #max: number;
  readonly #window: number;
  readonly #clients: number;
  readonly #failures = new Map<string, number[]>();

  /** Creates a limiter. */
  constructor(opts: LoginLimitOptions = {}) {
    this.#max = opts.maxFailures ?? 10;
    this.#window = opts.windowMs ?? 5 * 60_000;
    this.#clients = opts.maxClients ?? 10_000;
  }

  #recent(client: string, now: number): number[] {
    const kept = (this.#failures.get(client) ?? []).filter((t) => now - t < this.#window);
    if (kept.length) this.#failures.set(client, kept);
    else this.#failures.delete(client);
    return kept;
  }

  /** Seconds `client` must wait before trying again, or 0. */
  retryAfter(client: string, now: number = Date.now()): number {
    const recent = this.#recent(client, now);
    if (recent.length < this.#max) return 0;
    return Math.max(1, Math.ceil((recent[0]! + this.#window - now) / 1000));
  }

  /** Records a failed attempt of `client`. */
  fail(client: string, now: number = Date.now()): void {
    const recent = this.#recent(client, now);
    recent.push(now);
    this.#failures.delete(client); // re-insert: the map's order is oldest client first
    this.#failures.set(client, recent);
    while (this.#failures.size > this.#clients) {
      this.#failures.delete(this.#failures.keys().next().value!);
    }
  }
}

/** The client's address as the server saw it (`Deno.serve`'s info), or `local` in tests. */
export function clientAddress(c: Context): string {
  const env = c.env as { remoteAddr?: { hostname?: string } } | undefined;
  return env?.remoteAddr?.hostname ?? "local";
}
