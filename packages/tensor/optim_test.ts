import assert from "node:assert/strict";
import { ReferenceBackend } from "./testing/reference_backend.ts";
import { assertClose, randomValues } from "./_test_helpers.ts";
import * as T from "./mod.ts";

T.setDefaultBackend(new ReferenceBackend());

Deno.test("sgdUpdate follows torch.optim.SGD over three steps (momentum, dampening, nesterov, weight decay)", () => {
  for (const nesterov of [false, true]) {
    T.tidy(() => {
      const p0 = randomValues(5, 1), grads = [2, 3, 4].map((s) => randomValues(5, s));
      const o = {
        lr: 0.1,
        momentum: 0.9,
        dampening: nesterov ? 0 : 0.2,
        weightDecay: 0.01,
        nesterov,
      };
      const p = T.tensor(p0), buf = T.zeros([5]);
      const ref = [...p0], rbuf = new Array(5).fill(0);
      grads.forEach((g, step) => {
        T.sgdUpdate(p, T.tensor(g), buf, { ...o, firstStep: step === 0 });
        for (let i = 0; i < 5; i++) {
          let d = g[i]! + o.weightDecay * ref[i]!;
          rbuf[i] = step === 0 ? d : o.momentum * rbuf[i] + (1 - o.dampening) * d;
          d = nesterov ? d + o.momentum * rbuf[i] : rbuf[i];
          ref[i] = ref[i]! - o.lr * d;
        }
      });
      assertClose(p.toArray(), ref, 1e-6, 1e-6, `sgd nesterov=${nesterov}`);
      assertClose(buf.toArray(), rbuf, 1e-6, 1e-6, "momentum buffer");
    });
  }
});

Deno.test("adamwUpdate follows torch.optim.AdamW over three steps", () => {
  T.tidy(() => {
    const p0 = randomValues(6, 5), grads = [6, 7, 8].map((s) => randomValues(6, s));
    const o = { lr: 0.01, beta1: 0.8, beta2: 0.95, eps: 1e-6, weightDecay: 0.1 };
    const p = T.tensor(p0), m = T.zeros([6]), v = T.zeros([6]);
    const ref = [...p0], rm = new Array(6).fill(0), rv = new Array(6).fill(0);
    grads.forEach((g, k) => {
      const step = k + 1;
      T.adamwUpdate(p, T.tensor(g), m, v, { ...o, step });
      for (let i = 0; i < 6; i++) {
        ref[i] = ref[i]! * (1 - o.lr * o.weightDecay);
        rm[i] = o.beta1 * rm[i] + (1 - o.beta1) * g[i]!;
        rv[i] = o.beta2 * rv[i] + (1 - o.beta2) * g[i]! ** 2;
        const mh = rm[i] / (1 - o.beta1 ** step), vh = rv[i] / (1 - o.beta2 ** step);
        ref[i] = ref[i]! - o.lr * mh / (Math.sqrt(vh) + o.eps);
      }
    });
    assertClose(p.toArray(), ref, 1e-6, 1e-5, "adamw param");
    assertClose(m.toArray(), rm, 1e-6, 1e-5, "adamw m");
    assertClose(v.toArray(), rv, 1e-7, 1e-5, "adamw v");
  });
});

Deno.test("optimizer updates reject mismatched state", () => {
  T.tidy(() => {
    const p = T.zeros([4]);
    assert.throws(
      () => T.sgdUpdate(p, T.zeros([3]), T.zeros([4]), { lr: 1, firstStep: true }),
      /sgdUpdate: grad \[3\] f32 must be f32 with the 4 elements of param \[4\]/,
    );
    assert.throws(
      () => T.adamwUpdate(p, T.zeros([4]), T.zeros([4]), T.zeros([4]), { lr: 1, step: 0 }),
      /adamwUpdate: step must be an integer >= 1, got 0/,
    );
    assert.throws(
      () => T.sgdUpdate(p, T.zeros([4]), p, { lr: 1, firstStep: true }),
      /shares its storage/,
    );
    assert.throws(
      () => T.sgdUpdate(p, T.zeros([4]), null, { lr: 1, momentum: 0.9, firstStep: true }),
      /sgdUpdate: momentum 0.9 needs a momentum buffer \(got null\)/,
    );
  });
});

Deno.test("sgdUpdateMulti and adamwUpdateMulti: each tensor as its single update, bitwise", () => {
  T.tidy(() => {
    const sizes = [4, 1, 0, 7];
    const vals = (n: number, s: number) => randomValues(n, s);
    for (const momentum of [0, 0.9]) {
      for (const firstStep of [true, false]) {
        const o = { lr: 0.1, momentum, dampening: 0.1, weightDecay: 0.01, firstStep };
        const mk = () =>
          sizes.map((n, k) => ({
            param: T.tensor(vals(n, k + 1)),
            grad: T.tensor(vals(n, k + 11)),
            momentumBuf: momentum === 0 ? null : T.tensor(vals(n, k + 21)),
          }));
        const many = mk(), one = mk();
        T.sgdUpdateMulti(many, o);
        for (const it of one) T.sgdUpdate(it.param, it.grad, it.momentumBuf, o);
        many.forEach((it, k) => {
          assert.deepEqual(it.param.toArray(), one[k]!.param.toArray(), `param ${k}`);
          assert.deepEqual(it.momentumBuf?.toArray(), one[k]!.momentumBuf?.toArray(), `buf ${k}`);
        });
      }
    }
    const o = { lr: 0.01, beta1: 0.8, beta2: 0.95, eps: 1e-6, weightDecay: 0.1, step: 3 };
    const mk = () =>
      sizes.map((n, k) => ({
        param: T.tensor(vals(n, k + 1)),
        grad: T.tensor(vals(n, k + 11)),
        m: T.tensor(vals(n, k + 21)),
        v: T.tensor(vals(n, k + 31).map(Math.abs)),
      }));
    const many = mk(), one = mk();
    T.adamwUpdateMulti(many, o);
    for (const it of one) T.adamwUpdate(it.param, it.grad, it.m, it.v, o);
    many.forEach((it, k) => {
      for (const f of ["param", "m", "v"] as const) {
        assert.deepEqual(it[f].toArray(), one[k]![f].toArray(), `${f} ${k}`);
      }
    });
    T.sgdUpdateMulti([], { lr: 1, firstStep: true }); // nothing to update: no call
  });
});

Deno.test("the multi-tensor updates name the item at fault", () => {
  T.tidy(() => {
    const a = T.zeros([4]), b = T.zeros([2]);
    const first = { lr: 1, firstStep: true };
    assert.throws(
      () =>
        T.sgdUpdateMulti([{ param: a, grad: T.zeros([4]), momentumBuf: null }, {
          param: b,
          grad: T.zeros([3]),
          momentumBuf: null,
        }], first),
      /sgdUpdateMulti: item 1: grad \[3\] f32 must be f32 with the 2 elements of param \[2\]/,
    );
    assert.throws(
      () =>
        T.sgdUpdateMulti([{ param: a, grad: T.zeros([4]), momentumBuf: null }], {
          ...first,
          momentum: 0.9,
        }),
      /sgdUpdateMulti: item 0: momentum 0.9 needs a momentum buffer/,
    );
    assert.throws(
      () => T.sgdUpdateMulti([{ param: a, grad: T.zeros([4]), momentumBuf: T.zeros([4]) }], first),
      /sgdUpdateMulti: item 0: momentum 0 takes no momentum buffer \(pass null\)/,
    );
    assert.throws(
      () =>
        T.sgdUpdateMulti([
          { param: a, grad: T.zeros([4]), momentumBuf: null },
          { param: a, grad: T.zeros([4]), momentumBuf: null },
        ], first),
      /sgdUpdateMulti: item 1 writes the storage item 0 writes/,
    );
    assert.throws(
      () =>
        T.sgdUpdateMulti([
          { param: a, grad: T.zeros([4]), momentumBuf: null },
          { param: T.zeros([4]), grad: a, momentumBuf: null },
        ], first),
      /sgdUpdateMulti: item 1's grad is a storage item 0 writes/,
    );
    const m = T.zeros([4]);
    assert.throws(
      () => T.adamwUpdateMulti([{ param: a, grad: T.zeros([4]), m, v: m }], { lr: 1, step: 1 }),
      /adamwUpdateMulti: item 0 writes one storage twice/,
    );
    assert.throws(
      () => T.adamwUpdateMulti([], { lr: 1, step: 0 }),
      /adamwUpdateMulti: step must be an integer >= 1, got 0/,
    );
  });
});
