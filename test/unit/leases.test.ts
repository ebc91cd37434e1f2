// Leases: ids never shared between requests, renewed while the request runs, given back once.
import { afterEach, describe, expect, it, vi } from "vitest";
import { StoreTimeoutError } from "../../src/errors.js";
import {
  holdLeases,
  type LeaseHolder,
  leaseOf,
  nextLeaseId,
  releaseOnce,
  renewEveryMs,
} from "../../src/limits/leases.js";
import type { Lease } from "../../src/limits/stores/contract.js";

function recordingHolder(release: () => Promise<void> = () => Promise.resolve()) {
  const calls: string[] = [];
  const holder: LeaseHolder = {
    release: (leases) => {
      calls.push(`release ${leases.map((l) => l.leaseId).join(",")}`);
      return release();
    },
    renew: (leases) => {
      calls.push(`renew ${leases.map((l) => l.leaseId).join(",")}`);
      return Promise.reject(new Error("a failed renewal is ignored"));
    },
  };
  return { holder, calls };
}

const leases: Lease[] = [
  { key: "k1", leaseId: "a", leaseMs: 30_000 },
  { key: "k2", leaseId: "b", leaseMs: 1500 },
];

afterEach(() => {
  vi.useRealTimers();
});

describe("leases", () => {
  it("ids are unique and share this instance's random part", () => {
    const ids = Array.from({ length: 1000 }, () => nextLeaseId());
    expect(new Set(ids).size).toBe(1000);
    const instance = ids[0]!.split(":")[0];
    expect(ids.every((id) => id.startsWith(`${instance}:`))).toBe(true);
  });

  it("a concurrency check holds a lease; other limits none", () => {
    const slots = { algorithm: "concurrency" as const, name: "s", maxInFlight: 2, leaseMs: 5000 };
    expect(leaseOf({ key: "k", spec: slots, cost: 1, leaseId: "x" })).toEqual({
      key: "k",
      leaseId: "x",
      leaseMs: 5000,
    });
    expect(leaseOf({ key: "k", spec: slots, cost: 1 })).toBeNull();
    expect(
      leaseOf({ key: "k", spec: { algorithm: "token_bucket", name: "t", burst: 1, intervalMs: 1 }, cost: 1 }),
    ).toBeNull();
  });

  it("renews at a third of the shortest lease, never more often than every 250 ms", () => {
    expect(renewEveryMs(leases)).toBe(500);
    expect(renewEveryMs([{ key: "k", leaseId: "c", leaseMs: 300 }])).toBe(250);
  });

  it("renews while held, stops and releases once however often release is called", async () => {
    vi.useFakeTimers();
    const { holder, calls } = recordingHolder();
    const release = holdLeases(holder, leases);
    await vi.advanceTimersByTimeAsync(1000);
    expect(calls).toEqual(["renew a,b", "renew a,b"]);
    const first = release();
    expect(release()).toBe(first);
    await first;
    await vi.advanceTimersByTimeAsync(2000);
    expect(calls).toEqual(["renew a,b", "renew a,b", "release a,b"]);
  });

  it("the gateway's release reports a failure with its reason instead of throwing", async () => {
    vi.useFakeTimers();
    const failing = recordingHolder(() => Promise.reject(new StoreTimeoutError(100)));
    const release = releaseOnce(failing.holder, leases);
    expect(await release()).toEqual({ ok: false, reason: "timeout" });
    expect(await release()).toEqual({ ok: false, reason: "timeout" });
    expect(failing.calls).toEqual(["release a,b"]);

    const fine = recordingHolder();
    expect(await releaseOnce(fine.holder, leases)()).toEqual({ ok: true });
  });
});
