/**
 * Bounded request bodies. Every route reads its body through {@linkcode readBounded}
 * (the {@linkcode boundBody} middleware does it before any handler runs): the body is
 * read as a stream and the read stops, and the stream is canceled, as soon as more
 * than the limit has arrived. A declared `Content-Length` above the limit is refused
 * before reading anything; a `Content-Length` below the real size does not help a
 * client, since the bytes are counted as they arrive.
 *
 * @module
 */

import type { Context, MiddlewareHandler } from "hono";

/** Thrown by {@linkcode readBounded} when a body exceeds its limit. */
export class BodyTooLargeError extends Error {
  /** The limit in bytes. */
  readonly limit: number;
  /** Creates the error. */
  constructor(limit: number, detail: string) {
    super(`request body too large: ${detail}; the limit is ${limit} bytes`);
    this.name = "BodyTooLargeError";
    this.limit = limit;
  }
}

/**
 * Reads the body of `req` into memory, at most `max` bytes; throws
 * {@linkcode BodyTooLargeError} (after canceling the stream) beyond that.
 *
 * @example
 * ```ts
 * import { BodyTooLargeError, readBounded } from "@libra/api/body";
 * const ok = await readBounded(new Request("http://x/", { method: "POST", body: "abc" }), 3);
 * if (ok.length !== 3) throw new Error("3 bytes");
 * const big = new Request("http://x/", { method: "POST", body: "abcd" });
 * const err = await readBounded(big, 3).catch((e) => e);
 * if (!(err instanceof BodyTooLargeError)) throw new Error("over the limit");
 * ```
 */
export async function readBounded(req: Request, max: number): Promise<Uint8Array<ArrayBuffer>> {
  const declared = req.headers.get("content-length");
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > max) {
    await req.body?.cancel().catch(() => {});
    throw new BodyTooLargeError(max, `Content-Length is ${declared.trim()}`);
  }
  if (req.body === null) return new Uint8Array(0);
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let n = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.byteLength;
      if (n > max) {
        await reader.cancel().catch(() => {});
        throw new BodyTooLargeError(max, `more than ${max} bytes arrived`);
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

/** The 413 answer of the API's error format. */
export function tooLarge(c: Context, e: BodyTooLargeError): Response {
  return c.json({ error: `${e.message} for ${c.req.method} ${c.req.path}` }, 413);
}

/**
 * Middleware that reads the body of every request through {@linkcode readBounded}
 * with the limit `limitFor(c)` returns, answers 413 through `onTooLarge` beyond it,
 * and hands the handlers a request whose body is the bytes read.
 */
export function boundBody(
  limitFor: (c: Context) => number,
  onTooLarge: (c: Context, e: BodyTooLargeError) => Response | Promise<Response> = tooLarge,
): MiddlewareHandler {
  return async (c, next) => {
    const raw = c.req.raw;
    if (raw.body === null || raw.bodyUsed) return next();
    let bytes: Uint8Array<ArrayBuffer>;
    try {
      bytes = await readBounded(raw, limitFor(c));
    } catch (e) {
      if (e instanceof BodyTooLargeError) return onTooLarge(c, e);
      throw e;
    }
    if (raw.method !== "GET" && raw.method !== "HEAD") {
      const headers = new Headers(raw.headers);
      headers.set("content-length", String(bytes.byteLength));
      headers.delete("transfer-encoding");
      c.req.raw = new Request(raw.url, {
        method: raw.method,
        headers,
        body: bytes,
      });
    }
    await next();
  };
}

/** Deepest nesting of arrays and objects a JSON body may have. */
export const MAX_JSON_DEPTH = 32;

/**
 * The nesting depth of the JSON text `text` (arrays and objects), counted without
 * parsing it, stopping as soon as it exceeds `stopAbove`: a deep document is refused
 * before `JSON.parse` or anything after it recurses into it.
 */
export function jsonDepth(text: string, stopAbove = Infinity): number {
  let depth = 0;
  let deepest = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c) i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) inString = true;
    else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > deepest) {
        deepest = depth;
        if (deepest > stopAbove) return deepest;
      }
    } else if (ch === 0x5d || ch === 0x7d) depth--;
  }
  return deepest;
}
/** Body size limits in bytes. */
export interface BodyLimits {
  /** JSON bodies (default 1 MiB). */
  json: number;
  /** Trace uploads (default 64 MiB). */
  trace: number;
  /** Bench uploads (default 16 MiB). */
  bench: number;
  /** The dashboard's forms (default 64 KiB). */
  form: number;
}

/** The default body limits. */
export const DEFAULT_LIMITS: Readonly<BodyLimits> = {
  json: 1 << 20,
  trace: 64 << 20,
  bench: 16 << 20,
  form: 64 << 10,
};
