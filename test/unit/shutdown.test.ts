// The grace of a graceful stop (src/gateway/shutdown.ts), on fake timers: requests in flight get
// up to the grace to finish, idle keep-alive connections are closed as they appear, and what is
// still in flight when the grace runs out is reported for cutting.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { finishInFlight } from "../../src/gateway/shutdown.js";

function fakeProxy() {
  return {
    idleCloses: 0,
    closeIdleConnections() {
      this.idleCloses++;
    },
  };
}

describe("finishInFlight", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("resolves at once with 0 when nothing is in flight, after closing idle connections", async () => {
    const proxy = fakeProxy();
    await expect(finishInFlight(proxy, { count: 0 }, 5000)).resolves.toBe(0);
    expect(proxy.idleCloses).toBe(1);
  });

  it("waits for requests in flight to finish, closing connections as they go idle", async () => {
    const proxy = fakeProxy();
    const inFlight = { count: 2 };
    let result: number | undefined;
    void finishInFlight(proxy, inFlight, 5000).then((cut) => {
      result = cut;
    });
    await vi.advanceTimersByTimeAsync(100);
    expect(result).toBeUndefined();
    const closesSoFar = proxy.idleCloses;
    expect(closesSoFar).toBeGreaterThan(1);
    inFlight.count = 0;
    await vi.advanceTimersByTimeAsync(20);
    expect(result).toBe(0);
    expect(proxy.idleCloses).toBe(closesSoFar + 1);
  });

  it("gives up after the grace and reports how many are still in flight", async () => {
    const inFlight = { count: 3 };
    let result: number | undefined;
    void finishInFlight(fakeProxy(), inFlight, 1000).then((cut) => {
      result = cut;
    });
    await vi.advanceTimersByTimeAsync(990);
    expect(result).toBeUndefined();
    await vi.advanceTimersByTimeAsync(40);
    expect(result).toBe(3);
  });

  it("works without a proxy listener (the primary of workers has none)", async () => {
    const inFlight = { count: 1 };
    const done = finishInFlight(undefined, inFlight, 100);
    await vi.advanceTimersByTimeAsync(200);
    await expect(done).resolves.toBe(1);
  });
});
