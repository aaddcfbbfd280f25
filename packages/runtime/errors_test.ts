import assert from "node:assert/strict";
import { OutOfBudgetError } from "./errors.ts";

Deno.test("OutOfBudgetError: a call that needs bytes says how many, with what is in use", () => {
  const e = new OutOfBudgetError({
    neededBytes: 4096,
    usedBytes: 900,
    evictableBytes: 100,
    budgetBytes: 1000,
    lockedBytes: 300,
    keptBytes: 500,
  });
  assert.match(e.message, /^out of budget: 4096 bytes needed with 900 of 1000 in use \(300 locked/);
  assert.match(e.message, /and only 100 evictable; no larger budget is known/);
  // The unevictable bytes (500) fit the budget: no such clause.
  assert.doesNotMatch(e.message, /cannot be evicted alone/);
});

Deno.test("OutOfBudgetError: in use past the budget with nothing asked says so, and names the unevictable bytes past it", () => {
  const e = new OutOfBudgetError({
    neededBytes: 0,
    usedBytes: 1500,
    evictableBytes: 0,
    budgetBytes: 1000,
    knownFeasibleBytes: 4000,
    lockedBytes: 0,
    keptBytes: 1500,
  });
  assert.match(e.message, /^out of budget: 1500 bytes in use exceed the budget of 1000 \(0 locked/);
  assert.doesNotMatch(e.message, /bytes needed/);
  assert.match(
    e.message,
    /; the 1500 bytes that cannot be evicted alone exceed the budget; a budget of 4000 bytes is known to work/,
  );
  assert.equal(e.neededBytes, 0);
  assert.equal(e.keptBytes, 1500);
});
