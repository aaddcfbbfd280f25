/**
 * Seeded fuzzing of every JSON body schema (and the query schemas) through the API:
 * valid bodies mutated field by field, random JSON and random bytes. Every request must
 * get a typed answer (2xx, or 4xx with the API's error format), never a 500 or a hang;
 * what was accepted reads back the same, and every listing still answers afterwards.
 * A failure names the seed and case; LIBRA_FUZZ_SEED replays another seed.
 */
import { mulberry32 } from "@libra/util/rng";
import assert from "node:assert/strict";
import { fakeExecutor } from "./_fake_executor.ts";
import { openLab } from "./lab.ts";

const TOKEN = "fuzz-token";
const SEED = Number(Deno.env.get("LIBRA_FUZZ_SEED") ?? 7);
const CASES = 2000;

function rng(seed: number) {
  const next = mulberry32(seed);
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(xs: readonly T[]): T => xs[int(xs.length)]!;
  return { next, int, pick };
}
type Rng = ReturnType<typeof rng>;

const ATOMS: unknown[] = [
  0,
  1,
  -1,
  0.5,
  1.5,
  3,
  1e308,
  -1e308,
  2 ** 53,
  2 ** 53 + 2,
  2 ** 31,
  -0,
  "",
  "a",
  "gpt",
  "dtr",
  "dtr+swap",
  "tiny",
  "paper",
  "NaN",
  "1e999",
  "\u0000",
  "a\nb",
  "\u202e",
  "é".repeat(200),
  "x".repeat(5000),
  "__proto__",
  "constructor",
  null,
  true,
  false,
  [],
  {},
];

function randomJson(r: Rng, depth = 0): unknown {
  const k = r.int(depth > 4 ? 2 : 5);
  if (k <= 1) return r.pick(ATOMS);
  if (k === 2) return Array.from({ length: r.int(5) }, () => randomJson(r, depth + 1));
  if (k === 3) {
    const o: Record<string, unknown> = {};
    for (let i = r.int(5); i > 0; i--) {
      o[r.pick(["name", "model", "hidden", "nLayer", "x", "__proto__", "0"])] = randomJson(
        r,
        depth + 1,
      );
    }
    return o;
  }
  const n = 1 + r.int(3000); // nesting near and far past the API's depth limit
  return JSON.parse("[".repeat(n) + "]".repeat(n));
}

/** A valid body, then 0-3 mutations of its fields (or a wholly random body). */
function mutated(r: Rng, valid: Record<string, unknown>, fields: string[]): string {
  const roll = r.int(20);
  if (roll === 0) {
    return String.fromCharCode(...Array.from({ length: r.int(40) }, () => r.int(256)));
  }
  if (roll === 1) return JSON.stringify(randomJson(r));
  if (roll === 2) return JSON.stringify(valid).slice(0, r.int(40));
  const body: Record<string, unknown> = structuredClone(valid);
  for (let i = r.int(4); i > 0; i--) {
    const f = r.pick([...fields, "extra"]);
    if (r.int(4) === 0) delete body[f];
    else body[f] = randomJson(r);
  }
  return JSON.stringify(body);
}

const CONFIG = {
  name: "fuzz",
  model: "gpt",
  preset: "tiny",
  config: { nLayer: 1 },
  device: "cpu",
  budgetRatio: 0.5,
  policy: "dtr",
  costModel: "measured",
  steps: 2,
  seed: 1,
};
const BENCH = {
  suite: "s",
  commit: "abc",
  machine: { os: "linux" },
  results: [{
    kind: "live",
    model: "gpt",
    preset: "tiny",
    policy: "dtr",
    ratio: 0.5,
    feasible: true,
    overhead: 1.2,
    budgetBytes: 100,
    peakBytes: 90,
    losses: [1, 0.5],
    memory: [[0, 1], [1, 2]],
  }],
};

async function fuzzLab() {
  return await openLab({
    dataDir: await Deno.makeTempDir({ prefix: "libra-fuzz-" }),
    dbPath: ":memory:",
    token: TOKEN,
    executor: fakeExecutor(),
    worker: false,
    log: () => {},
  });
}

/** Checks one answer: a typed status and the API's error format. */
async function judge(res: Response, where: string): Promise<unknown> {
  const text = await res.text();
  assert.ok(
    [200, 201, 204, 400, 404, 409, 413].includes(res.status),
    `${where}: status ${res.status}: ${text.slice(0, 300)}`,
  );
  if (res.status === 204) return null;
  const body = JSON.parse(text);
  if (res.status >= 400) {
    assert.equal(typeof body.error, "string", `${where}: ${text.slice(0, 200)}`);
    if (res.status === 400 && body.issues) {
      for (const i of body.issues) {
        assert.equal(typeof i.field, "string", where);
        assert.equal(typeof i.reason, "string", where);
      }
    }
  }
  return body;
}

Deno.test(`fuzz: configuration bodies (POST, PUT, PATCH) get typed answers and read back (seed ${SEED})`, async () => {
  const l = await fuzzLab();
  const r = rng(SEED);
  const json = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" };
  const fields = Object.keys(CONFIG).concat("budgetBytes");
  try {
    const base = await (await l.api.request("/configurations", {
      method: "POST",
      headers: json,
      body: JSON.stringify(CONFIG),
    })).json();
    const accepted = { post: 0, put: 0, patch: 0 };
    for (let i = 0; i < CASES; i++) {
      const method = (["POST", "PUT", "PATCH"] as const)[i % 3]!;
      const path = method === "POST" ? "/configurations" : `/configurations/${base.id}`;
      const body = method === "PATCH"
        ? mutated(r, { name: "p" }, fields)
        : mutated(r, CONFIG, fields);
      const where = `seed ${SEED} case ${i}: ${method} ${body.slice(0, 120)}`;
      const res = await l.api.request(path, { method, headers: json, body });
      const out = await judge(res, where) as { id?: string } | null;
      if (res.status === 200 || res.status === 201) {
        accepted[method.toLowerCase() as "post"]++;
        const back = await (await l.api.request(`/configurations/${out!.id}`)).json();
        assert.deepEqual(back, out, `${where}: reads back the same`);
      }
    }
    assert.ok(
      accepted.post > 50 && accepted.put > 50 && accepted.patch > 50,
      JSON.stringify(accepted),
    );
    for (const p of ["/configurations", "/runs", "/traces", "/compare/models"]) {
      assert.equal((await l.api.request(p)).status, 200, p);
    }
  } finally {
    await l.close();
  }
});

Deno.test(`fuzz: run, bench and trace bodies and every query get typed answers (seed ${SEED})`, async () => {
  const l = await fuzzLab();
  const r = rng(SEED + 1);
  const auth = { Authorization: `Bearer ${TOKEN}` };
  const json = { ...auth, "Content-Type": "application/json" };
  try {
    const cfg = await (await l.api.request("/configurations", {
      method: "POST",
      headers: json,
      body: JSON.stringify(CONFIG),
    })).json();
    const benchFields = Object.keys(BENCH);
    const resultFields = Object.keys(BENCH.results[0]!).concat("overheadMin", "device", "trace");
    let accepted = 0;
    for (let i = 0; i < CASES; i++) {
      let res: Response;
      let what: string;
      switch (i % 4) {
        case 0: {
          what = mutated(r, { configurationId: cfg.id }, ["configurationId"]);
          res = await l.api.request("/runs", { method: "POST", headers: json, body: what });
          break;
        }
        case 1: {
          const raw = mutated(r, BENCH.results[0]!, resultFields);
          let result: unknown = raw;
          try {
            result = JSON.parse(raw);
          } catch { /* keep the broken text as the result */ }
          what = r.int(2)
            ? mutated(r, { ...BENCH, results: [result] }, benchFields)
            : JSON.stringify({ ...BENCH, results: [result] });
          res = await l.api.request("/bench", { method: "POST", headers: json, body: what });
          break;
        }
        case 2: {
          const q = new URLSearchParams();
          for (const k of ["name", "policies", "ratios"]) {
            if (r.int(2)) q.set(k, String(r.pick([...ATOMS, "dtr,lru", "1,0.5", "libra", "0,2"])));
          }
          const trace = r.int(3)
            ? '{"INSTRUCTION":"CONSTANT","NAME":"x"}\n{"INSTRUCTION":"MEMORY","NAME":"x","MEMORY":"4"}'
            : JSON.stringify(randomJson(r));
          what = `?${q} ${trace.slice(0, 60)}`;
          res = await l.api.request(`/traces?${q}`, { method: "POST", headers: auth, body: trace });
          break;
        }
        default: {
          const q = new URLSearchParams();
          for (
            const k of ["limit", "offset", "model", "policy", "status", "kind", "preset", "source"]
          ) {
            if (r.int(3) === 0) {
              q.set(k, String(r.pick([...ATOMS, "queued", "live", "simulate", 10])));
            }
          }
          const path = r.pick(["/runs", "/configurations", "/traces", "/compare"]);
          what = `GET ${path}?${q}`;
          res = await l.api.request(`${path}?${q}`);
        }
      }
      const where = `seed ${SEED} case ${i}: ${what.slice(0, 160)}`;
      await judge(res, where);
      if (res.status === 201) accepted++;
    }
    assert.ok(accepted > 100, `accepted ${accepted}`);
    for (
      const p of ["/configurations", "/runs", "/traces", "/compare/models", "/compare?model=gpt"]
    ) {
      assert.equal((await l.api.request(p)).status, 200, p);
    }
  } finally {
    await l.close();
  }
});
