// The KEYS and ARGV of each script call, as the lua/ files document them at their top.
import { describe, expect, it } from "vitest";
import type { LimitCheck, StoreDecision } from "../../src/limits/spec.js";
import {
  chargeArguments,
  checkArguments,
  peekArguments,
  refundArguments,
  renewArguments,
} from "../../src/limits/stores/redis/arguments.js";
import { SHADOW_FLAG } from "../../src/limits/stores/redis/scripts.js";

const bucket: LimitCheck = {
  key: "t:{c:a}:p.b",
  spec: { algorithm: "token_bucket", name: "p.b", burst: 5, intervalMs: 100 },
  cost: 2,
};
const shadow: LimitCheck = {
  key: "t:{c:a}:p.w",
  spec: { algorithm: "fixed_window", name: "p.w", limit: 10, windowMs: 60_000, shadow: true },
  cost: 1,
};
const slots: LimitCheck = {
  key: "t:{c:a}:p.s",
  spec: { algorithm: "concurrency", name: "p.s", maxInFlight: 2, leaseMs: 1000 },
  cost: 3,
  leaseId: "lease-1",
};

describe("check.lua arguments", () => {
  it("lays out KEYS per request, then the batch, its spec table, and per request its count and limits", () => {
    const atFive = { checks: [bucket, shadow], nowMs: 5 };
    const leased = { checks: [slots], nowMs: undefined };
    const batched = { checks: [{ ...bucket, batch: 4 }], nowMs: undefined };
    const plain = { checks: [{ ...bucket, cost: 1 }, shadow], nowMs: undefined };
    expect(checkArguments([atFive, leased, batched, plain], 1234.5, 0)).toEqual([
      // KEYS: the limits' keys, request after request
      bucket.key,
      shadow.key,
      slots.key,
      bucket.key,
      bucket.key,
      shadow.key,
      // requests, deadline, then the spec table: each distinct algorithm and params once
      4,
      1234.5,
      3,
      1,
      5,
      100,
      2 + SHADOW_FLAG,
      10,
      60_000,
      6,
      2,
      1000,
      // per request: its limit count ("n@now" with a test's now), then each limit's spec index,
      // with its cost when that is not 1
      "2@5",
      "1|2",
      2,
      1,
      "3|lease-1",
      1,
      "1|2:4",
      2,
      1,
      2,
    ]);
    expect(checkArguments([plain], undefined, 0).slice(2, 4)).toEqual([1, ""]);
  });

  it("sends a route budget's max_cost as the need after the cost", () => {
    const budget = { ...bucket, cost: 3, need: 40 };
    expect(checkArguments([{ checks: [budget], nowMs: undefined }], undefined, 0).slice(-2)).toEqual([
      1,
      "1|3^40",
    ]);
  });

  it("numbers a calendar window's params again when the period starts differ within a batch", () => {
    const daily: LimitCheck = {
      key: "t:{c:a}:p.d",
      spec: {
        algorithm: "fixed_window",
        name: "p.d",
        limit: 10,
        windowMs: 86_400_000,
        calendar: { unit: "day", tz: "UTC" },
      },
      cost: 1,
    };
    const at = (day: number, hour: number) => ({ checks: [daily], nowMs: Date.UTC(2026, 11, day, hour) });
    const args = checkArguments([at(1, 12), at(1, 13), at(2, 12)], undefined, 0);
    // 3 keys, 3 requests, no deadline, then two specs: the same day's twice is one
    expect(args.slice(3, 6)).toEqual([3, "", 2]);
    expect(args.slice(-6).filter((_, i) => i % 2 === 1)).toEqual([1, 1, 2]);
  });
});

describe("charge, peek and renew arguments", () => {
  it("charge.lua: keys, now, deadline, then four per limit without the shadow flag", () => {
    expect(chargeArguments([bucket, shadow], { nowMs: undefined, deadline: 99, redisNowMs: 0 })).toEqual([
      bucket.key,
      shadow.key,
      "",
      99,
      1,
      5,
      100,
      2,
      2,
      10,
      60_000,
      1,
    ]);
  });

  it("peek.lua: keys, now, then code and params per limit", () => {
    expect(peekArguments([bucket, slots], 7, 0)).toEqual([bucket.key, slots.key, 7, 1, 5, 100, 6, 2, 1000]);
  });

  it("renew.lua: one key, now, the lease length, the lease ids", () => {
    const held = [
      { key: "k", leaseId: "a", leaseMs: 500 },
      { key: "k", leaseId: "b", leaseMs: 500 },
    ];
    expect(renewArguments(held, undefined)).toEqual(["k", "", 500, "a", "b"]);
  });
});

describe("refund.lua arguments", () => {
  const allowed = (n: number, extra: object = {}): StoreDecision => ({
    allowed: true,
    outcomes: Array.from({ length: n }, () => ({
      allowed: true,
      remaining: 0,
      resetMs: 0,
      retryAfterMs: 0,
      ...extra,
    })),
  });

  it("gives back the units and leases of allowed requests, at the time they were decided", () => {
    expect(refundArguments([{ checks: [bucket, slots], decision: allowed(2), at: "17.5" }])).toEqual({
      keys: [bucket.key, slots.key],
      // The Redis clock first (no test's now), then per limit.
      args: ["", "17.5", 1, 5, 100, 2, "17.5", 6, 2, 1000, "lease-1"],
    });
  });

  it("a batched take gives back what it took; a denied request or a denying shadow limit nothing", () => {
    const batched = { ...bucket, batch: 4 };
    expect(refundArguments([{ checks: [batched], decision: allowed(1, { taken: 3 }), at: 1 }])?.args).toEqual(
      ["", 1, 1, 5, 100, 3],
    );
    const denied: StoreDecision = { ...allowed(1), allowed: false };
    expect(refundArguments([{ checks: [bucket], decision: denied, at: 1 }])).toBeUndefined();
    const shadowDenied: StoreDecision = {
      allowed: true,
      outcomes: [
        { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0 },
        { allowed: false, remaining: 0, resetMs: 0, retryAfterMs: 5 },
      ],
    };
    expect(refundArguments([{ checks: [bucket, shadow], decision: shadowDenied, at: 1 }])?.keys).toEqual([
      bucket.key,
    ]);
  });
});

describe("a calendar window's param 2: the period starts around the time the script decides at", () => {
  const monthly: LimitCheck = {
    key: "t:{c:a}:p.m",
    spec: {
      algorithm: "fixed_window",
      name: "p.m",
      limit: 100,
      windowMs: 2_592_000_000,
      calendar: { unit: "month", tz: "UTC" },
    },
    cost: 1,
  };
  const DEC_15 = Date.UTC(2026, 11, 15);
  // November, December, January and February's starts: the script finds its own now among them.
  const starts = [
    Date.UTC(2026, 10, 1),
    Date.UTC(2026, 11, 1),
    Date.UTC(2027, 0, 1),
    Date.UTC(2027, 1, 1),
  ].join(" ");

  it("around a test's now when there is one, else around the store's estimate of Redis's clock", () => {
    const request = { checks: [monthly], nowMs: DEC_15 };
    expect(checkArguments([request], undefined, 0).slice(-5)).toEqual([2, 100, starts, `1@${DEC_15}`, 1]);
    expect(checkArguments([{ ...request, nowMs: undefined }], undefined, DEC_15).slice(-5)).toEqual([
      2,
      100,
      starts,
      1,
      1,
    ]);
    expect(chargeArguments([monthly], { nowMs: undefined, deadline: undefined, redisNowMs: DEC_15 })).toEqual(
      [monthly.key, "", "", 2, 100, starts, 1],
    );
    expect(peekArguments([monthly], DEC_15, 0)).toEqual([monthly.key, DEC_15, 2, 100, starts]);
  });

  it("a refund: around the time the check decided at", () => {
    const taken: StoreDecision = {
      allowed: true,
      outcomes: [{ allowed: true, remaining: 99, resetMs: 1, retryAfterMs: 0 }],
    };
    expect(
      refundArguments([{ checks: [monthly], decision: taken, at: `${DEC_15 + 0.25}` }])?.args.slice(3, 5),
    ).toEqual([100, starts]);
  });
});
