/** The page frame: navigation, styles, and the islands bundle. @module */

import type { ComponentChildren, VNode } from "preact";

/** Layout props. */
export interface LayoutProps {
  /** Page title. */
  title: string;
  /** Which nav entry is current. */
  active?: "runs" | "compare" | "configurations" | "sweeps" | "traces" | "login";
  /** Whether the visitor holds the write token (cookie). */
  canWrite?: boolean;
  /** Refresh the page every few seconds when JavaScript is off (live runs). */
  refreshWithoutJs?: boolean;
  /** Refresh the page every few seconds, JavaScript or not (a sweep in progress). */
  refresh?: boolean;
  /** Page content. */
  children: ComponentChildren;
}

const NAV = [
  ["runs", "/runs", "Runs"],
  ["compare", "/compare", "Compare"],
  ["configurations", "/configurations", "Configurations"],
  ["sweeps", "/sweeps", "Sweeps"],
  ["traces", "/traces", "Traces"],
] as const;

/** Renders a full page. */
export function Layout(p: LayoutProps): VNode {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <title>{`${p.title} · Libra lab`}</title>
        <link rel="stylesheet" href="/static/style.css" />
        <link rel="icon" href="/static/favicon.svg" type="image/svg+xml" />
        {p.refresh && <meta http-equiv="refresh" content="5" />}
        {p.refreshWithoutJs && !p.refresh && (
          <noscript>
            <meta http-equiv="refresh" content="3" />
          </noscript>
        )}
        <script type="module" src="/static/build/islands.js" defer></script>
      </head>
      <body>
        <header class="top">
          <a class="brand" href="/runs">
            <span class="logo">⚖</span> Libra lab
          </a>
          <nav>
            {NAV.map(([key, href, label]) => (
              <a href={href} class={p.active === key ? "active" : undefined}>{label}</a>
            ))}
          </nav>
          <div class="who">
            {p.canWrite
              ? (
                <form method="post" action="/logout">
                  <span class="badge ok">write access</span>{" "}
                  <button type="submit" class="link">log out</button>
                </form>
              )
              : <a href="/login" class={p.active === "login" ? "active" : undefined}>log in</a>}
          </div>
        </header>
        <main>{p.children}</main>
        <footer>Libra for TypeScript · tensor re-materialization under a memory budget</footer>
      </body>
    </html>
  );
}

/** A status badge. */
export function StatusBadge(p: { status: string }): VNode {
  return <span class={`badge status-${p.status}`}>{p.status}</span>;
}
