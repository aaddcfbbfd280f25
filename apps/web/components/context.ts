/** What every page handler gets, and small helpers for rendering and access. @module */

import { access, type Lab, TOKEN_COOKIE } from "@libra/api";
import type { Context } from "hono";
import { getCookie } from "hono/cookie";
import type { VNode } from "preact";
import { renderToString } from "preact-render-to-string";

/** Names suggested by the forms. */
export interface Catalog {
  /** Models of the zoo. */
  models: string[];
  /** Policies and planners. */
  policies: string[];
}

/** Shared state of the dashboard. */
export interface WebContext {
  /** The lab (store, auth, API). */
  lab: Lab;
  /** Names for the forms. */
  catalog: Catalog;
}

/** What the visitor's cookie allows. */
export function level(c: Context, ctx: WebContext): "write" | "read" | "none" {
  return access(ctx.lab.auth, getCookie(c, TOKEN_COOKIE) ?? null);
}

/** Renders a page. */
export function page(c: Context, vnode: VNode, status: 200 | 400 | 404 | 409 = 200): Response {
  return c.html("<!DOCTYPE html>" + renderToString(vnode), status);
}

/** A write from the dashboard: the cookie must hold the write token, and the origin must match. */
export function writeAllowed(c: Context, ctx: WebContext): boolean {
  const origin = c.req.header("origin");
  if (origin && origin !== new URL(c.req.url).origin) return false;
  return level(c, ctx) === "write";
}
