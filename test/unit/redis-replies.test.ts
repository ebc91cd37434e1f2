// The scripts' replies are shape-checked, never cast: a wrong reply fails the call and never
// allows; the fourth field of a limit is read as retry-after, tokens taken or delay, in one place.
import { describe, expect, it } from "vitest";
import { StoreReplyError } from "../../src/errors.js";
import type { LimitCheck } from "../../src/limits/spec.js";
import {
  fourthFieldOf,
  parseChargeReply,
  parseCheckReply,
  parseScriptHeader,
} from "../../src/limits/stores/redis/replies.js";

const bucket: LimitCheck = {
  key: "k",
  spec: { algorithm: "token_bucket", name: "t", burst: 5, intervalMs: 100 },
  cost: 1,
};
const batched: LimitCheck = { ...bucket, batch: 4 };
const leaky: LimitCheck = {
  key: "q",
  spec: { algorithm: "leaky_bucket", name: "q", queue: 3, intervalMs: 200 },
  cost: 1,
};
const one = (c: LimitCheck) => ({ checks: [c] });

describe("parseCheckReply", () => {
  it("refuses a malformed script reply rather than allowing", () => {
    expect(() => parseCheckReply([1, 1, 9, 100], [one(bucket)], "1000")).toThrow(/unexpected reply/);
    expect(() => parseCheckReply("OK", [one(bucket)], "1000")).toThrow(/unexpected reply/);
    expect(() => parseCheckReply([1, 1, "9", 100, 0], [one(bucket)], "1000")).toThrow(/integers/);
    expect(() => parseCheckReply("OK", [one(bucket)], "1000")).toThrow(StoreReplyError);
    expect(
      parseCheckReply(
        [0, 0, 0, 200, 100, 1, 1, 4, 100, 0],
        [one(bucket), { checks: [bucket], nowMs: 5 }],
        "1000",
      ),
    ).toEqual([
      {
        allowed: false,
        outcomes: [{ allowed: false, remaining: 0, resetMs: 200, retryAfterMs: 100 }],
        decidedAt: "1000",
      },
      // A request decided at a test's time says so: a give-back finds its window by it.
      {
        allowed: true,
        outcomes: [{ allowed: true, remaining: 4, resetMs: 100, retryAfterMs: 0 }],
        decidedAt: 5,
      },
    ]);
  });

  it("reads the fourth field as retry-after when denied, tokens taken for a batched take, else a delay", () => {
    const [denied, taken, delayed, none] = parseCheckReply(
      [0, 0, 0, 200, 150, 1, 1, 3, 100, 4, 1, 1, 2, 600, 400, 1, 1, 4, 100, 0],
      [one(batched), one(batched), one(leaky), one(batched)],
      "1000",
    );
    expect(denied!.outcomes[0]).toEqual({ allowed: false, remaining: 0, resetMs: 200, retryAfterMs: 150 });
    expect(taken!.outcomes[0]).toEqual({
      allowed: true,
      remaining: 3,
      resetMs: 100,
      retryAfterMs: 0,
      taken: 4,
    });
    expect(delayed!.outcomes[0]).toEqual({
      allowed: true,
      remaining: 2,
      resetMs: 600,
      retryAfterMs: 0,
      delayMs: 400,
    });
    // A zero is no taking and no wait: the field is left out, as the memory store leaves it.
    expect(none!.outcomes[0]).toEqual({ allowed: true, remaining: 4, resetMs: 100, retryAfterMs: 0 });
  });

  it("names the field's meaning from the outcome and the check", () => {
    expect(fourthFieldOf(false, batched)).toBe("retry_after");
    expect(fourthFieldOf(false, leaky)).toBe("retry_after");
    expect(fourthFieldOf(true, batched)).toBe("taken");
    expect(fourthFieldOf(true, leaky)).toBe("delay");
    expect(fourthFieldOf(true, bucket)).toBe("delay");
  });

  it("splits a batch's reply by the number of limits of each request", () => {
    const decisions = parseCheckReply(
      [1, 1, 4, 100, 0, 1, 2, 100, 0, 0, 0, 0, 100, 50],
      [{ checks: [bucket, bucket] }, { checks: [bucket] }],
      "1000",
    );
    expect(decisions.map((d) => d.outcomes.length)).toEqual([2, 1]);
    expect(decisions[0]!.outcomes[1]).toEqual({ allowed: true, remaining: 2, resetMs: 100, retryAfterMs: 0 });
    expect(decisions[1]).toEqual({
      allowed: false,
      outcomes: [{ allowed: false, remaining: 0, resetMs: 100, retryAfterMs: 50 }],
      decidedAt: "1000",
    });
  });
});

describe("parseScriptHeader", () => {
  it("refuses a reply without the script's clock and status rather than deciding", () => {
    expect(() => parseScriptHeader([1, 1, 1, 4, 100, 0])).toThrow(/unexpected reply/);
    expect(() => parseScriptHeader(["1700000000000.5", 2])).toThrow(/unexpected reply/);
    expect(() => parseScriptHeader("OK")).toThrow(/unexpected reply/);
    expect(parseScriptHeader(["1700000000000.5", 0])).toEqual({
      clock: "1700000000000.5",
      redisMs: 1_700_000_000_000.5,
      expired: true,
      body: [],
    });
    expect(parseScriptHeader(["12.5", 1, 7, 8])).toMatchObject({ expired: false, body: [7, 8] });
  });
});

describe("parseChargeReply", () => {
  it("reads remaining and reset per limit, and refuses anything else", () => {
    expect(parseChargeReply([3, 100, 0, 2000], 2)).toEqual([
      { remaining: 3, resetMs: 100 },
      { remaining: 0, resetMs: 2000 },
    ]);
    expect(() => parseChargeReply([3, 100], 2)).toThrow(StoreReplyError);
    expect(() => parseChargeReply([3, "100"], 1)).toThrow(/unexpected reply/);
  });
});
