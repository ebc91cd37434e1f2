// Retries on a clock the test moves: the budget (a floor per window plus a share of the
// requests, forgotten as the window slides) and which failed attempts may be sent again.
import { describe, expect, it } from "vitest";
import { mayRetry, targetFailure } from "../../src/proxy/retry.js";
import { RETRY_BUDGET, RetryBudget } from "../../src/upstream/retry-budget.js";

const errorWith = (code: string) => Object.assign(new Error(code), { code });

describe("RetryBudget", () => {
  const budget = () => {
    const clock = { now: 0 };
    return { clock, budget: new RetryBudget(() => clock.now) };
  };
  const retries = (b: RetryBudget, asked: number) => {
    let granted = 0;
    for (let i = 0; i < asked; i++) if (b.tryRetry()) granted++;
    return granted;
  };

  it("allows the floor per window with no traffic at all", () => {
    const { budget: b } = budget();
    expect(retries(b, 50)).toBe(RETRY_BUDGET.floor);
  });

  it("allows a fifth of the requests above the floor: an outage costs at most 20 % more load", () => {
    const { budget: b } = budget();
    for (let i = 0; i < 1000; i++) b.request();
    expect(retries(b, 1000)).toBe(RETRY_BUDGET.floor + 200);
  });

  it("forgets what fell out of the window, bucket by bucket", () => {
    const { budget: b, clock } = budget();
    for (let i = 0; i < 1000; i++) b.request();
    expect(retries(b, 100)).toBe(100);
    // Still inside the window: 210 allowed in all, 100 spent.
    clock.now = 5000;
    expect(retries(b, 200)).toBe(110);
    // The first bucket's requests (and its retries) are gone, the later retries are not.
    clock.now = 10_000;
    expect(retries(b, 100)).toBe(0);
    // Those fell out too: the floor again.
    clock.now = 15_000;
    expect(retries(b, 100)).toBe(RETRY_BUDGET.floor);
    // After a long quiet spell nothing of before is left.
    clock.now = 1_000_000;
    expect(retries(b, 100)).toBe(RETRY_BUDGET.floor);
  });
});

describe("which failures count against a target", () => {
  it("connection refused, connect timeouts and resets do; the route's deadline and the client do not", () => {
    expect(targetFailure(errorWith("ECONNREFUSED"))).toBe("refused");
    expect(targetFailure(errorWith("UND_ERR_CONNECT_TIMEOUT"))).toBe("connect_timeout");
    expect(targetFailure(errorWith("UND_ERR_SOCKET"))).toBe("reset");
    expect(targetFailure(errorWith("ECONNRESET"))).toBe("reset");
    expect(targetFailure(errorWith("TOLLGATE_UPSTREAM_DEADLINE"))).toBeNull();
    expect(targetFailure(errorWith("TOLLGATE_CONNECT_WAIT"))).toBeNull();
    expect(targetFailure(errorWith("UND_ERR_HEADERS_TIMEOUT"))).toBeNull();
    expect(targetFailure(new Error("the client closed the connection"))).toBeNull();
  });
});

describe("mayRetry", () => {
  const refused = errorWith("ECONNREFUSED");
  const reset = errorWith("UND_ERR_SOCKET");

  it("any method that never reached the upstream", () => {
    for (const method of ["GET", "POST", "PATCH"])
      expect(mayRetry({ method, reached: false, bodyRead: false, err: refused })).toBe(true);
  });

  it("only idempotent methods once the request may have reached it", () => {
    for (const method of ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"])
      expect(mayRetry({ method, reached: true, bodyRead: false, err: reset })).toBe(true);
    for (const method of ["POST", "PATCH"])
      expect(mayRetry({ method, reached: true, bodyRead: false, err: reset })).toBe(false);
  });

  it("never a body already read, nor a failure that is not the target's", () => {
    expect(mayRetry({ method: "PUT", reached: true, bodyRead: true, err: reset })).toBe(false);
    expect(
      mayRetry({
        method: "GET",
        reached: true,
        bodyRead: false,
        err: errorWith("TOLLGATE_UPSTREAM_DEADLINE"),
      }),
    ).toBe(false);
  });
});
