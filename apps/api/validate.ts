/**
 * The API's zod validator middleware: it validates a JSON body or the query with a
 * zod schema before the handler runs, hands the handler the parsed value through
 * `c.req.valid(target)`, and answers every invalid request in one format:
 * `400 {"error": "invalid request", "issues": [{"field", "reason"}]}` (query fields
 * prefixed `query.`). A JSON body nested deeper than {@linkcode MAX_JSON_DEPTH} is
 * refused before it is parsed.
 *
 * @module
 */

import type { Context, Env, MiddlewareHandler } from "hono";
import type { z } from "zod";
import { jsonDepth, MAX_JSON_DEPTH } from "./body.ts";
import { type FieldError, fieldErrors } from "./schemas.ts";

/** A 400 answer listing the field errors. */
export function badRequest(c: Context, errors: FieldError[]): Response {
  return c.json({ error: "invalid request", issues: errors }, 400);
}

/** Parses the JSON text of a body: the value, or the field error saying why not. */
export function parseJsonText(text: string): { ok: true; value: unknown } | {
  ok: false;
  issue: FieldError;
} {
  if (jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH) {
    return {
      ok: false,
      issue: { field: "body", reason: `JSON nested deeper than ${MAX_JSON_DEPTH} levels` },
    };
  }
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return {
      ok: false,
      issue: {
        field: "body",
        reason: `not valid JSON (${e instanceof Error ? e.message : e}); send application/json`,
      },
    };
  }
}

/** Where {@linkcode validate} reads: the JSON body or the query string. */
export type ValidationTarget = "json" | "query";

/**
 * Middleware that validates `target` (the body as JSON, whatever its content type, or
 * the query's single values) with `schema`; the handler reads the parsed value with
 * `c.req.valid(target)`. Invalid input gets the API's 400 answer.
 *
 * @example
 * ```ts
 * import { Hono } from "hono";
 * import { z } from "zod";
 * import { validate } from "@libra/api/validate";
 * const app = new Hono().post("/", validate("json", z.object({ n: z.number() })), (c) =>
 *   c.json({ twice: c.req.valid("json").n * 2 }));
 * const bad = await app.request("/", { method: "POST", body: '{"n":"x"}' });
 * if (bad.status !== 400) throw new Error("a string is not a number");
 * ```
 */
export function validate<T extends ValidationTarget, S extends z.ZodType>(
  target: T,
  schema: S,
): MiddlewareHandler<Env, string, { out: { [K in T]: z.output<S> } }> {
  return async (c, next) => {
    let raw: unknown;
    if (target === "json") {
      const parsed = parseJsonText(await c.req.text());
      if (!parsed.ok) return badRequest(c, [parsed.issue]);
      raw = parsed.value;
    } else raw = c.req.query();
    const r = schema.safeParse(raw);
    if (!r.success) return badRequest(c, fieldErrors(r.error, target === "query" ? "query." : ""));
    c.req.addValidatedData(target, r.data as object);
    await next();
  };
}
