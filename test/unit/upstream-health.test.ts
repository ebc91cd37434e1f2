// A target's health on a clock the test moves: ejection after FAILURES_TO_EJECT failures in a
// row, the doubling back-off and its cap, probation one request at a time, active checks, and
// one event per ejection and per return.
import { describe, expect, it } from "vitest";
import { type HealthEvent, PASSIVE_HEALTH, TargetHealth } from "../../src/upstream/health.js";

function target() {
  const clock = { now: 0 };
  const events: HealthEvent[] = [];
  const health = new TargetHealth(
    () => clock.now,
    (e) => events.push(e),
  );
  return { clock, events, health };
}

const fail = (health: TargetHealth, times: number, reason = "refused") => {
  for (let i = 0; i < times; i++) {
    health.sent();
    health.failed(reason);
  }
};

describe("passive health", () => {
  it("ejects after three failures in a row, not after two with a success between", () => {
    const { health, events } = target();
    fail(health, 2);
    health.succeeded();
    fail(health, 2);
    expect(health.available()).toBe(true);
    fail(health, 1);
    expect(health.available()).toBe(false);
    expect(health.ejected).toBe(true);
    expect(events).toEqual([
      { kind: "ejected", by: "passive", reason: "refused", failures: 3, backoffMs: 1000 },
    ]);
  });

  it("returns after its back-off on probation: one request at a time, the first failure ejects it for twice as long", () => {
    const { health, events, clock } = target();
    fail(health, 3);
    clock.now = 999;
    expect(health.available()).toBe(false);
    clock.now = 1000;
    expect(health.available()).toBe(true);
    expect(events.at(-1)).toEqual({ kind: "returned", by: "backoff" });
    health.sent();
    // Its one request is in flight: no other goes there until it ends.
    expect(health.available()).toBe(false);
    expect(health.ejected).toBe(false);
    health.failed("reset");
    expect(events.at(-1)).toEqual({
      kind: "ejected",
      by: "passive",
      reason: "reset",
      failures: 1,
      backoffMs: 2000,
    });
    clock.now = 2999;
    expect(health.available()).toBe(false);
    clock.now = 3000;
    expect(health.available()).toBe(true);
    health.sent();
    health.succeeded();
    // Fully back: concurrent requests again, and three failures to eject.
    health.sent();
    expect(health.available()).toBe(true);
    fail(health, 2);
    expect(health.available()).toBe(true);
  });

  it("doubles the back-off up to its cap, and starts over once the target stayed in that long", () => {
    const { health, events, clock } = target();
    const backoffs: number[] = [];
    fail(health, 3);
    for (let i = 0; i < 8; i++) {
      const last = events.at(-1) as { backoffMs: number };
      backoffs.push(last.backoffMs);
      clock.now += last.backoffMs;
      expect(health.available()).toBe(true);
      fail(health, 1);
    }
    expect(backoffs).toEqual([1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
    clock.now += 30_000;
    health.available();
    health.succeeded();
    clock.now += PASSIVE_HEALTH.maxBackoffMs + 1;
    fail(health, 3);
    expect(events.at(-1)).toMatchObject({ kind: "ejected", backoffMs: 1000 });
  });

  it("a client that went away tells nothing: probation goes on", () => {
    const { health, clock } = target();
    fail(health, 3);
    clock.now = 1000;
    expect(health.available()).toBe(true);
    health.sent();
    health.released();
    expect(health.available()).toBe(true);
    expect(health.ejected).toBe(false);
  });

  it("late failures of requests sent before the ejection change nothing", () => {
    const { health, events } = target();
    fail(health, 6);
    expect(events.filter((e) => e.kind === "ejected")).toHaveLength(1);
  });
});

describe("active health", () => {
  it("two failed checks in a row eject until a check passes, whatever the back-off", () => {
    const { health, events, clock } = target();
    health.checkFailed("status 503");
    health.checkPassed();
    health.checkFailed("status 503");
    // One failed check is not an outage (a lost answer, a pause of the gateway's own).
    expect(health.available()).toBe(true);
    health.checkFailed("status 503");
    health.checkFailed("status 503");
    expect(health.available()).toBe(false);
    clock.now = 1_000_000;
    expect(health.available()).toBe(false);
    health.checkPassed();
    health.checkPassed();
    expect(health.available()).toBe(true);
    expect(events).toEqual([
      { kind: "ejected", by: "active", reason: "status 503" },
      { kind: "returned", by: "active" },
    ]);
  });

  it("a passing check readmits a target its requests ejected, and resets its back-off", () => {
    const { health, events } = target();
    fail(health, 3);
    health.checkPassed();
    expect(health.available()).toBe(true);
    fail(health, 3);
    expect(events.map((e) => e.kind)).toEqual(["ejected", "returned", "ejected"]);
    expect(events.at(-1)).toMatchObject({ backoffMs: 1000 });
  });

  it("a failed check on a target already ejected by its requests is one ejection, with one return", () => {
    const { health, events, clock } = target();
    fail(health, 3);
    health.checkFailed("refused");
    health.checkFailed("refused");
    clock.now = 60_000;
    expect(health.available()).toBe(false);
    health.checkPassed();
    expect(events.map((e) => e.kind)).toEqual(["ejected", "returned"]);
  });

  it("a back-off that ran out before a failed check is said to be over first", () => {
    const { health, events, clock } = target();
    fail(health, 3);
    clock.now = 5000;
    health.checkFailed("refused");
    health.checkFailed("refused");
    expect(events.map((e) => [e.kind, e.by])).toEqual([
      ["ejected", "passive"],
      ["returned", "backoff"],
      ["ejected", "active"],
    ]);
  });

  it("checks removed by a reload readmit what only a check could", () => {
    const { health, events } = target();
    health.checkFailed("status 500");
    health.checkFailed("status 500");
    health.checksRemoved();
    expect(health.available()).toBe(true);
    expect(events.map((e) => e.kind)).toEqual(["ejected", "returned"]);
  });
});
