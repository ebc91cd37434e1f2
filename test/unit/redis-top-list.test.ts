// In a Redis Cluster the top list is counted in the gateway and written once a second: a burst of
// denials costs one ZINCRBY per caller and bucket, not two commands per denial.
import type { Cluster } from "ioredis";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { TOP_BUCKET_TTL_MS } from "../../src/limits/stores/contract.js";
import { Boundary } from "../../src/limits/stores/redis/boundary.js";
import { TOP_FLUSH_MS, TopListCounts } from "../../src/limits/stores/redis/top-list.js";

/** The two commands the counts use, recorded. */
function fakeClient(fail = false) {
  const calls: (string | number)[][] = [];
  const answer = () => (fail ? Promise.reject(new Error("Connection is closed.")) : Promise.resolve(1));
  const client = {
    zincrby: (key: string, n: number, member: string) => {
      calls.push(["zincrby", key, n, member]);
      return answer();
    },
    pexpire: (key: string, ms: number) => {
      calls.push(["pexpire", key, ms]);
      return answer();
    },
  };
  return { client: client as unknown as Cluster, calls };
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe("TopListCounts", () => {
  it("sums denials per bucket and caller, and writes them once after a second", async () => {
    const { client, calls } = fakeClient();
    const counts = new TopListCounts(client, new Boundary(100));
    for (let i = 0; i < 50; i++) counts.count("top:1", "client:a");
    counts.count("top:1", "client:b");
    counts.count("top:2", "client:a");
    await vi.advanceTimersByTimeAsync(TOP_FLUSH_MS - 1);
    expect(calls).toEqual([]);
    await vi.advanceTimersByTimeAsync(1);
    expect(calls).toEqual([
      ["zincrby", "top:1", 50, "client:a"],
      ["zincrby", "top:1", 1, "client:b"],
      ["pexpire", "top:1", TOP_BUCKET_TTL_MS],
      ["zincrby", "top:2", 1, "client:a"],
      ["pexpire", "top:2", TOP_BUCKET_TTL_MS],
    ]);
    // Written once: nothing more to write until the next denial.
    await vi.advanceTimersByTimeAsync(5 * TOP_FLUSH_MS);
    expect(calls).toHaveLength(5);
  });

  it("writes at once when asked (before the top list is read), and never rejects", async () => {
    const { client, calls } = fakeClient(true);
    const counts = new TopListCounts(client, new Boundary(100));
    counts.count("top:1", "client:a");
    await expect(counts.flush()).resolves.toBeUndefined();
    expect(calls).toHaveLength(2);
    await counts.flush();
    expect(calls).toHaveLength(2);
  });
});
