/**
 * A generator of LSTM-like traces in the DTR format, for the simulator's speed
 * benchmark and tests: a stacked LSTM unrolled over time (matmuls, a gate
 * `chunk` whose four outputs are views, pointwise ops, in-place gradient
 * accumulation with MUTATE, COPY/COPY_FROM of the hidden state), then its
 * backward pass in reverse with RELEASEs as a framework would issue them.
 * Costs and sizes are deterministic in the seed.
 *
 * @module
 */

/** Shape of {@link lstmLikeTrace}. */
export interface LstmLikeOptions {
  /** Time steps. Default 100. */
  steps?: number;
  /** Stacked layers. Default 3. */
  layers?: number;
  /** Bytes of one hidden-state tensor. Default 1 MiB. */
  hiddenBytes?: number;
  /** Seed of the costs. Default 1. */
  seed?: number;
}

/**
 * Returns the text of an LSTM-like trace (about 160 lines per cell: 100 steps
 * of 3 layers make ~48k lines, the size of the published LSTM log).
 */
export function lstmLikeTrace(o: LstmLikeOptions = {}): string {
  const T = o.steps ?? 100, L = o.layers ?? 3, H = o.hiddenBytes ?? 1 << 20;
  let seed = (o.seed ?? 1) >>> 0;
  const rnd = () => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    return seed / 4294967296;
  };
  const out: string[] = [JSON.stringify({ ANNOTATION: "START", INSTRUCTION: "ANNOTATE" })];
  let id = 0;
  const fresh = () => `x${id++}`;
  const constant = (bytes: number): string => {
    const n = fresh();
    out.push(JSON.stringify({ INSTRUCTION: "CONSTANT", NAME: n }));
    out.push(JSON.stringify({ INSTRUCTION: "MEMORY", MEMORY: String(bytes), NAME: n }));
    return n;
  };
  const call = (op: string, args: string[], results: [number, number][], time: number) => {
    const names = results.map(() => fresh());
    out.push(JSON.stringify({
      ARGS: args,
      INSTRUCTION: "CALL",
      NAME: op,
      RESULT: names,
      TIME: String(Math.max(1, Math.round(time * (0.8 + 0.4 * rnd())))),
    }));
    results.forEach(([bytes, alias], i) => {
      out.push(JSON.stringify({
        INSTRUCTION: "MEMORY",
        MEMORY: String(alias >= 0 ? 0 : bytes),
        NAME: names[i],
      }));
      out.push(JSON.stringify({ ALIAS: String(alias), INSTRUCTION: "ALIAS", NAME: names[i] }));
    });
    return names;
  };
  const one = (op: string, args: string[], bytes: number, time: number) =>
    call(op, args, [[bytes, -1]], time)[0]!;
  const release = (n: string) => out.push(JSON.stringify({ INSTRUCTION: "RELEASE", NAME: n }));
  const mutate = (op: string, args: string[], idx: number[], time: number) =>
    out.push(JSON.stringify({
      ARGS: args,
      INSTRUCTION: "MUTATE",
      MUTATE: idx.map(String),
      NAME: op,
      TIME: String(time),
    }));

  const wih: string[] = [], whh: string[] = [], bias: string[] = [];
  const gW: string[] = [], gU: string[] = [];
  for (let l = 0; l < L; l++) {
    wih.push(constant(4 * H));
    whh.push(constant(4 * H));
    bias.push(constant(4 * 1024));
  }
  for (let l = 0; l < L; l++) {
    gW.push(one("zeros", [], 4 * H, 2000));
    gU.push(one("zeros", [], 4 * H, 2000));
  }
  const xs: string[] = [];
  for (let t = 0; t < T; t++) xs.push(constant(H));
  const h: string[] = [], c: string[] = [];
  for (let l = 0; l < L; l++) {
    h.push(one("zeros", [], H, 500));
    c.push(one("zeros", [], H, 500));
  }
  interface Cell {
    inp: string;
    hPrev: string;
    cPrev: string;
    gates: string[];
    act: string[];
    tc: string;
    h: string;
    c: string;
  }
  const cells: Cell[][] = [];
  for (let t = 0; t < T; t++) {
    const row: Cell[] = [];
    let inp = xs[t]!;
    for (let l = 0; l < L; l++) {
      const a = one("mm", [inp, wih[l]!], 4 * H, 40000);
      const b = one("mm", [h[l]!, whh[l]!], 4 * H, 40000);
      const g = one("add", [a, b, bias[l]!], 4 * H, 6000);
      release(a);
      release(b);
      const gates = call("chunk", [g], [[0, 0], [0, 0], [0, 0], [0, 0]], 300);
      release(g);
      const act = [
        one("sigmoid", [gates[0]!], H, 2000),
        one("sigmoid", [gates[1]!], H, 2000),
        one("tanh", [gates[2]!], H, 2000),
        one("sigmoid", [gates[3]!], H, 2000),
      ];
      const fc = one("mul", [act[1]!, c[l]!], H, 2500);
      const ig = one("mul", [act[0]!, act[2]!], H, 2500);
      const cn = one("add", [fc, ig], H, 2500);
      release(fc);
      release(ig);
      const tc = one("tanh", [cn], H, 2000);
      const hn = one("mul", [act[3]!, tc], H, 2500);
      row.push({ inp, hPrev: h[l]!, cPrev: c[l]!, gates, act, tc, h: hn, c: cn });
      // The module keeps its state in one handle: COPY it, then rebind it.
      const hold = fresh();
      out.push(JSON.stringify({ DST: hold, INSTRUCTION: "COPY", SRC: hn }));
      release(hold);
      h[l] = hn;
      c[l] = cn;
      inp = hn;
    }
    cells.push(row);
  }
  const loss = one("sum", [h[L - 1]!], 1024, 3000);
  out.push(JSON.stringify({ ANNOTATION: "BACKWARD", INSTRUCTION: "ANNOTATE" }));
  const gl = one("sum_backward", [loss], H, 3000);
  const dh: string[] = [], dc: string[] = [];
  for (let l = 0; l < L; l++) {
    dh.push(l === L - 1 ? gl : one("zeros", [], H, 500));
    dc.push(one("zeros", [], H, 500));
  }
  for (let t = T - 1; t >= 0; t--) {
    let dIn: string | null = null;
    for (let l = L - 1; l >= 0; l--) {
      const x = cells[t]![l]!;
      let dhl = dh[l]!;
      if (dIn !== null) {
        const s = one("add", [dhl, dIn], H, 2500);
        release(dhl);
        release(dIn);
        dhl = s;
      }
      const dtc = one("mul_backward", [dhl, x.act[3]!], H, 2500);
      const dco = one("mul_backward", [dhl, x.tc], H, 2500);
      const dcn = one("tanh_backward", [dtc, x.tc, dc[l]!], H, 3000);
      release(dtc);
      const dfc = one("mul_backward", [dcn, x.cPrev], H, 2500);
      const dcp = one("mul_backward", [dcn, x.act[1]!], H, 2500);
      const dig = one("mul_backward", [dcn, x.act[2]!], H, 2500);
      const dgg = one("mul_backward", [dcn, x.act[0]!], H, 2500);
      release(dcn);
      const dg = one(
        "activation_backward",
        [dig, dfc, dgg, dco, x.act[0]!, x.act[1]!, x.act[2]!, x.act[3]!],
        4 * H,
        8000,
      );
      for (const n of [dig, dfc, dgg, dco, dhl]) release(n);
      // gradients of the weights accumulate in place
      mutate("addmm_", [gW[l]!, dg, x.inp], [0], 40000);
      mutate("addmm_", [gU[l]!, dg, x.hPrev], [0], 40000);
      const dhp = one("mm_backward", [dg, whh[l]!], H, 40000);
      dIn = one("mm_backward", [dg, wih[l]!], H, 40000);
      release(dg);
      for (const n of [...x.act, ...x.gates, x.tc, x.c, x.h]) release(n);
      release(dc[l]!);
      dc[l] = dcp;
      dh[l] = dhp;
    }
    if (dIn !== null) release(dIn);
  }
  for (let l = 0; l < L; l++) {
    release(dh[l]!);
    release(dc[l]!);
  }
  // The optimizer writes the weights' new values into the state handles.
  for (let l = 0; l < L; l++) {
    const nw = one("sub", [wih[l]!, gW[l]!], 4 * H, 6000);
    out.push(JSON.stringify({ DST: wih[l], INSTRUCTION: "COPY_FROM", SRC: nw }));
    release(nw);
  }
  return out.join("\n") + "\n";
}
