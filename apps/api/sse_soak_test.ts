/**
 * A bounded soak of the server-sent events route on a real socket: a few thousand
 * clients connect to a run's event stream, read its first event and disconnect. The
 * server must end every stream (no poll loop left running), and its memory and file
 * descriptors must come back near their baseline.
 */
import assert from "node:assert/strict";
import { tinyMlpConfiguration } from "./_test_helpers.ts";
import { fakeExecutor } from "./_fake_executor.ts";
import { openLab } from "./lab.ts";

const CYCLES = Number(Deno.env.get("LIBRA_SOAK_CYCLES") ?? 2000);

function openFds(): number | null {
  try {
    return [...Deno.readDirSync("/proc/self/fd")].length;
  } catch {
    return null;
  }
}

function settle(): Promise<void> {
  return new Promise((r) => setTimeout(r, 300));
}

Deno.test({
  name:
    `SSE soak: ${CYCLES} connect/disconnect cycles leave memory, descriptors and polls at baseline`,
  sanitizeResources: false,
  async fn() {
    const gc = (globalThis as { gc?: () => void }).gc;
    const lab = await openLab({
      dataDir: await Deno.makeTempDir({ prefix: "libra-soak-" }),
      dbPath: ":memory:",
      token: "t",
      executor: fakeExecutor(),
      worker: false,
      log: () => {},
    });
    // count the store reads the open streams make: each live stream polls the run
    let polls = 0;
    const getRun = lab.store.getRun.bind(lab.store);
    lab.store.getRun = (id: string) => {
      polls++;
      return getRun(id);
    };
    const { createApi } = await import("./app.ts");
    const api = createApi({ store: lab.store, auth: lab.auth, eventPollMs: 20 });
    const ac = new AbortController();
    const server = Deno.serve(
      { port: 0, hostname: "127.0.0.1", signal: ac.signal, onListen() {} },
      api.fetch,
    );
    const url = `http://127.0.0.1:${server.addr.port}`;
    try {
      const cfg = await lab.store.createConfiguration(tinyMlpConfiguration("soak"));
      const run = (await lab.store.createRunFromConfiguration(cfg.id))!; // stays queued
      const cycle = async () => {
        const ac = new AbortController();
        const res = await fetch(`${url}/runs/${run.id}/events`, { signal: ac.signal });
        assert.equal(res.status, 200);
        const reader = res.body!.getReader();
        const { value } = await reader.read();
        assert.match(new TextDecoder().decode(value), /event: progress/);
        ac.abort();
        await reader.cancel().catch(() => {});
      };
      const measure = async () => {
        await settle();
        gc?.();
        gc?.();
        return { heap: Deno.memoryUsage().heapUsed, fds: openFds() };
      };
      for (let i = 0; i < 100; i++) await cycle(); // warm up (JIT, pools)
      const before = await measure();
      for (let i = 0; i < CYCLES; i += 8) {
        await Promise.all(Array.from({ length: Math.min(8, CYCLES - i) }, cycle));
      }
      const after = await measure();
      // no stream is still polling: over 200 ms at most the run's own reads happen
      const p0 = polls;
      await new Promise((r) => setTimeout(r, 200));
      assert.ok(polls - p0 <= 2, `${polls - p0} polls in 200 ms after every client left`);
      // without --expose-gc the heap holds garbage of unknown size: only with gc() is it a measure
      const grew = after.heap - before.heap;
      if (gc) assert.ok(grew < 8 * 2 ** 20, `heap grew by ${(grew / 2 ** 20).toFixed(1)} MiB`);
      if (before.fds !== null && after.fds !== null) {
        assert.ok(after.fds - before.fds <= 8, `descriptors ${before.fds} -> ${after.fds}`);
      }
      console.log(
        `soak: ${CYCLES} cycles${gc ? "" : " (no --expose-gc: heap not checked)"}; heap ${
          (before.heap / 2 ** 20).toFixed(1)
        } -> ${(after.heap / 2 ** 20).toFixed(1)} MiB, descriptors ${before.fds} -> ${after.fds}`,
      );
    } finally {
      ac.abort();
      await server.finished;
      await lab.close();
    }
  },
});
