// What /readyz decides (src/admin/readiness.ts): not ready only when the store fails and some
// route fails closed; the reason is the operator's description of the failure either way.
import { afterEach, describe, expect, it, vi } from "vitest";
import { readiness } from "../../src/admin/readiness.js";
import { StoreConnectionError } from "../../src/errors.js";
import { runtimeOf } from "./support/proxy-fakes.js";

const config = (onFailure: "open" | "closed") =>
  runtimeOf(`
store: { url: "redis://10.0.0.5:6379", on_failure: open }
upstreams: { api: "http://127.0.0.1:1" }
routes:
  - { name: login, match: { path: /login }, upstream: api, on_failure: ${onFailure} }
  - { name: default, match: { path: / }, upstream: api }
`);

const up = { ping: async () => {} };
const down = { ping: async () => Promise.reject(new StoreConnectionError("Stream isn't writeable")) };
const describeError = (err: unknown) => `described: ${(err as Error).message}`;

describe("readiness", () => {
  it("ready, with no reason, while the store answers", async () => {
    expect(await readiness(config("closed"), up, describeError)).toEqual({ ready: true });
  });

  it("not ready when the store fails and a route fails closed", async () => {
    expect(await readiness(config("closed"), down, describeError)).toEqual({
      ready: false,
      reason: "described: Stream isn't writeable",
    });
  });

  it("still ready when no route fails closed, saying so", async () => {
    expect(await readiness(config("open"), down, describeError)).toEqual({
      ready: true,
      reason: "described: Stream isn't writeable; no route fails closed",
    });
  });

  it("by default, describes the failure from the config's store address, in words", async () => {
    const r = await readiness(config("closed"), down);
    expect(r.ready).toBe(false);
    expect(r.reason).toContain("10.0.0.5:6379");
    expect(r.reason).not.toContain("Stream isn't writeable");
  });

  describe("a store that does not answer", () => {
    afterEach(() => {
      vi.useRealTimers();
    });

    it("is given store.timeout, at least 250 ms, then described as a timeout", async () => {
      vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "setImmediate"] });
      const hung = { ping: () => new Promise<void>(() => {}) };
      let settled = false;
      const pending = readiness(config("closed"), hung).then((r) => {
        settled = true;
        return r;
      });
      await vi.advanceTimersByTimeAsync(249);
      expect(settled).toBe(false);
      // The deadline's timer, then the two turns it waits for so that replies already received
      // are read first (deadline.ts): two setImmediates, each the next timer of the fake clock.
      // Step through them one timer at a time, a bounded number of steps (a timer another file
      // left behind may come in between). Not vi.runAllTimersAsync(): a self-re-arming timer
      // another file left running (the unit files share a worker) can land in this fake clock,
      // and it would be run until the clock gave up after 10 000 timers.
      await vi.advanceTimersByTimeAsync(1);
      for (let step = 0; step < 10 && !settled; step++) await vi.advanceTimersToNextTimerAsync();
      expect(settled).toBe(true);
      expect(await pending).toEqual({
        ready: false,
        reason: "limit store at 10.0.0.5:6379 did not answer within 250 ms",
      });
    });
  });
});
