import assert from "node:assert/strict";
import { DOMParser } from "linkedom";
import { memoryPlot, overheadPlot, slug } from "./plots.ts";
import type { PolicySummaryJson } from "./schema.ts";

/** Checks XML well-formedness by balancing tags (independent of the DOM library that wrote it). */
function assertWellFormed(xml: string): void {
  const body = xml.replace(/^<\?xml[^>]*\?>\s*/, "").replace(/<style>[\s\S]*?<\/style>/g, "");
  const stack: string[] = [];
  for (const m of body.matchAll(/<(\/?)([a-zA-Z][\w:-]*)[^>]*?(\/?)>/g)) {
    const [, close, name, self] = m;
    if (self) continue;
    if (close) assert.equal(stack.pop(), name, `closing </${name}> matches`);
    else stack.push(name!);
  }
  assert.deepEqual(stack, [], "every tag closed");
}

function parse(svg: string) {
  assertWellFormed(svg);
  const doc = new DOMParser().parseFromString(
    svg.replace(/^<\?xml[^>]*\?>\s*/, ""),
    "image/svg+xml",
  );
  const root = doc.documentElement!;
  assert.equal(root.tagName.toLowerCase(), "svg");
  assert.equal(root.getAttribute("xmlns"), "http://www.w3.org/2000/svg");
  return root;
}

const summaries: PolicySummaryJson[] = [
  {
    workload: "w",
    policy: "dtr",
    smallestFeasibleRatio: 0.4,
    nonMonotone: false,
    curve: [
      { ratio: 1, feasible: true, overhead: 1 },
      { ratio: 0.7, feasible: true, overhead: 1.05 },
      { ratio: 0.4, feasible: true, overhead: 1.3 },
      { ratio: 0.2, feasible: false, overhead: null },
    ],
  },
  {
    workload: "w",
    policy: "lru",
    smallestFeasibleRatio: 0.7,
    nonMonotone: false,
    curve: [
      { ratio: 1, feasible: true, overhead: 1 },
      { ratio: 0.7, feasible: true, overhead: 1.2 },
      { ratio: 0.4, feasible: false, overhead: null },
      { ratio: 0.2, feasible: false, overhead: null },
    ],
  },
  {
    workload: "other",
    policy: "dtr",
    smallestFeasibleRatio: 1,
    nonMonotone: false,
    curve: [{ ratio: 1, feasible: true, overhead: 1 }],
  },
];

Deno.test("overheadPlot() draws one line per policy through its feasible points, a legend and infeasible marks", () => {
  const root = parse(overheadPlot("w", summaries));
  const lines = root.querySelectorAll("g[aria-description^='policy ']");
  assert.deepEqual(
    [...lines].map((g: { getAttribute(n: string): string }) => g.getAttribute("aria-description")),
    ["policy dtr", "policy lru"],
  );
  // dtr has three feasible points -> a path with three vertices (M + 2 L); lru has two.
  const vertices = [...lines].map((
    g: { querySelector(s: string): { getAttribute(n: string): string } },
  ) => (g.querySelector("path")!.getAttribute("d").match(/[ML]/g) ?? []).length);
  assert.deepEqual(vertices, [3, 2]);
  const texts = [...root.querySelectorAll("text")].map((t: { textContent: string }) =>
    t.textContent
  );
  assert.ok(
    texts.includes("\u2014 dtr") && texts.includes("\u2014 lru"),
    "legend names both policies",
  );
  assert.ok(texts.some((t: string) => t.startsWith("Overhead vs budget: w")), "title");
  // Three infeasible (policy, ratio) pairs: dtr@0.2, lru@0.4, lru@0.2.
  const crosses = root.querySelector("g[aria-description='infeasible point']");
  assert.equal(crosses.querySelectorAll("path").length, 3);
  assert.throws(() => overheadPlot("nope", summaries), /no results for workload "nope"/);
});

Deno.test("memoryPlot() draws the memory line and the budget as a horizontal rule", () => {
  const t = {
    workload: "w",
    policy: "dtr",
    ratio: 0.5,
    budgetBytes: 500,
    points: [0, 1, 2, 3].map((i) => ({ call: i, bytes: [100, 500, 300, 400][i]! })),
    events: [{ call: 1, kind: "evict" }],
  };
  const root = parse(memoryPlot(t, 1000));
  const line = root.querySelector("g[aria-description='memory in use'] path");
  assert.ok(line, "memory line drawn");
  const budget = root.querySelector("g[aria-description='budget'] line");
  assert.ok(budget, "budget rule drawn");
  // A horizontal rule: same y at both ends, spanning the frame.
  assert.equal(budget.getAttribute("y1"), budget.getAttribute("y2"));
  assert.ok(Number(budget.getAttribute("x2")) - Number(budget.getAttribute("x1")) > 300);
  // The line's highest vertex is the 500-byte point, which sits exactly on the 500-byte budget.
  const ys = [...line.getAttribute("d").matchAll(/[ML][^,]+,([-\d.]+)/g)].map((m) => Number(m[1]));
  assert.ok(
    Math.abs(Math.min(...ys) - Number(budget.getAttribute("y1"))) < 0.01,
    `line top ${Math.min(...ys)} vs budget ${budget.getAttribute("y1")}`,
  );
  assert.ok(root.querySelector("g[aria-description='event evict']"), "event markers");
  const texts = [...root.querySelectorAll("text")].map((x: { textContent: string }) =>
    x.textContent
  );
  assert.ok(texts.includes("budget 500 B"));
  assert.throws(() => memoryPlot({ ...t, points: [] }), /is empty/);
});

Deno.test("slug() makes file-name-safe labels", () => {
  assert.equal(slug("live:mlp/tiny"), "live_mlp_tiny");
  assert.equal(slug("trace:resnet32-56"), "trace_resnet32-56");
});
