/** Pages `/login` and `/logout`: keep the API token in an HttpOnly cookie for the forms. @module */

import { access, TOKEN_COOKIE } from "@libra/api";
import type { Hono } from "hono";
import { deleteCookie, setCookie } from "hono/cookie";
import { renderToString } from "preact-render-to-string";
import { page, type WebContext } from "../components/context.ts";
import { Layout } from "../components/layout.tsx";
import { clientAddress, LoginLimiter } from "../security.ts";

const safeNext = (n: unknown) => (typeof n === "string" && /^\/[a-z]/.test(n) ? n : "/runs");

/** Registers the pages; `limiter` counts failed logins per client (10 per 5 minutes). */
export function register(app: Hono, ctx: WebContext, limiter = new LoginLimiter()): void {
  const form = (next: string, error: string | null) => (
    <Layout title="Log in" active="login">
      <h1>Log in</h1>
      <section class="card narrow">
        <p>
          Paste the API token (<code>LIBRA_API_TOKEN</code>, printed by the server on first start
          and kept in{" "}
          <code>.libra/api-token</code>). The dashboard keeps it in a cookie for this site only.
        </p>
        <form method="post" action="/login">
          <input type="hidden" name="next" value={next} />
          <label class="field">
            <span class="label">Token</span>
            <input type="password" name="token" autocomplete="current-password" required />
          </label>
          {error && <p class="error" role="alert">{error}</p>}
          <div class="actions">
            <button type="submit" class="primary">Log in</button>
          </div>
        </form>
      </section>
    </Layout>
  );
  app.get("/login", (c) => page(c, form(safeNext(c.req.query("next")), null)));
  app.post("/login", async (c) => {
    const client = clientAddress(c);
    const wait = limiter.retryAfter(client);
    if (wait > 0) {
      c.header("Retry-After", String(wait));
      const html = renderToString(
        form("/runs", `Too many failed attempts from ${client}; try again in ${wait} s.`),
      );
      return c.html("<!DOCTYPE html>" + html, 429);
    }
    const body = await c.req.parseBody();
    const token = typeof body.token === "string" ? body.token.trim() : "";
    const next = safeNext(body.next);
    const { auth } = ctx.lab;
    const ok = access(auth, token) === "write" ||
      (auth.readToken !== null && access(auth, token) === "read");
    if (!ok) {
      limiter.fail(client);
      return page(c, form(next, "That token is not valid on this server."), 400);
    }
    setCookie(c, TOKEN_COOKIE, token, {
      httpOnly: true,
      sameSite: "Strict",
      path: "/",
      maxAge: 60 * 60 * 24 * 30,
      secure: new URL(c.req.url).protocol === "https:",
    });
    return c.redirect(next, 303);
  });
  app.post("/logout", (c) => {
    deleteCookie(c, TOKEN_COOKIE, { path: "/" });
    return c.redirect("/runs", 303);
  });
}
