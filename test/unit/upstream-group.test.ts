// One upstream's targets without sockets or the wall clock: which target each attempt gets
// (weights, never one already tried, panic when all are ejected), the events operators see,
// a reload's adoption of unchanged targets, and the active checks on injected timers.
import { describe, expect, it } from "vitest";
import { ActiveHealthCheck, type Timers } from "../../src/upstream/active-health.js";
import { type GroupEvent, type GroupOptions, type Target, UpstreamGroup } from "../../src/upstream/group.js";

class FakePool {
  closed = false;
  constructor(readonly origin: string) {}
  async close() {
    this.closed = true;
  }
  async destroy() {
    this.closed = true;
  }
}

/** Timers the test fires by hand. */
class ManualTimers implements Timers {
  next = 1;
  readonly pending = new Map<number, { fn: () => void; ms: number }>();
  set(fn: () => void, ms: number) {
    const id = this.next++;
    this.pending.set(id, { fn, ms });
    return id;
  }
  clear(handle: unknown) {
    this.pending.delete(handle as number);
  }
  /** Fires every pending timer of `ms`. */
  fire(ms: number) {
    for (const [id, t] of [...this.pending]) {
      if (t.ms !== ms) continue;
      this.pending.delete(id);
      t.fn();
    }
  }
}

function group(weights: number[], extra: Partial<GroupOptions<FakePool>> = {}) {
  const clock = { now: 0 };
  const events: GroupEvent[] = [];
  const g = new UpstreamGroup<FakePool>({
    name: "api",
    targets: weights.map((weight, i) => ({
      origin: `http://10.0.0.${i + 1}:80`,
      host: `10.0.0.${i + 1}`,
      weight,
      key: `k${i + 1}`,
    })),
    health: undefined,
    clock: () => clock.now,
    dispatcher: (origin) => new FakePool(origin),
    probe: async () => null,
    onEvent: (e) => events.push(e),
    ...extra,
  });
  return { g, clock, events };
}

const eject = (t: Target<FakePool>) => {
  for (let i = 0; i < 3; i++) t.health.failed("refused");
};

describe("UpstreamGroup.pick", () => {
  it("spreads by weight", () => {
    const { g } = group([1, 1, 2]);
    const counts = [0, 0, 0];
    for (let i = 0; i < 400; i++) {
      const t = g.pick()!;
      counts[g.targets.indexOf(t)]!++;
      t.health.succeeded();
    }
    expect(counts).toEqual([100, 100, 200]);
  });

  it("never gives a retry a target already tried, and says when none is left", () => {
    const { g } = group([1, 1, 1]);
    const first = g.pick()!;
    const second = g.pick([first])!;
    const third = g.pick([first, second])!;
    expect(new Set([first, second, third]).size).toBe(3);
    expect(g.pick([first, second, third])).toBeNull();
  });

  it("skips an ejected target, and a retry does not fall back to it while others are healthy", () => {
    const { g, events } = group([1, 1]);
    const [a, b] = g.targets as Target<FakePool>[];
    eject(a!);
    for (let i = 0; i < 10; i++) expect(g.pick()).toBe(b);
    expect(g.pick([b!])).toBeNull();
    expect(events[0]).toMatchObject({
      kind: "ejected",
      upstream: "api",
      target: "http://10.0.0.1:80",
      by: "passive",
    });
    expect(g.counts()).toEqual({ healthy: 1, ejected: 1 });
  });

  it("with every target ejected, sends to all of them (panic) and says so once per ejection that leaves none", () => {
    const { g, events } = group([1, 1]);
    for (const t of g.targets) eject(t);
    expect(events.filter((e) => e.kind === "no_healthy_target")).toEqual([
      { kind: "no_healthy_target", upstream: "api", targets: 2 },
    ]);
    const seen = new Set([g.pick(), g.pick(), g.pick(), g.pick()]);
    expect(seen.size).toBe(2);
    expect(g.counts()).toEqual({ healthy: 0, ejected: 2 });
  });

  it("an upstream of one target retries on it (a URL in front of a load balancer)", () => {
    const { g } = group([1]);
    const only = g.pick()!;
    expect(g.pick([only])).toBe(only);
  });

  it("a target on probation with its one request in flight is used when nothing else is in rotation", () => {
    const { g, clock } = group([1, 1]);
    const [a, b] = g.targets as Target<FakePool>[];
    eject(a!);
    eject(b!);
    clock.now = 1000;
    const probe = g.pick()!;
    // The other one came back too; both on probation, each with its request in flight.
    const other = g.pick()!;
    expect(new Set([probe, other]).size).toBe(2);
    expect(g.pick()).not.toBeNull();
  });
});

describe("a reload", () => {
  it("adopts the targets whose settings did not change, with their pool and health", () => {
    const first = group([1, 1]);
    const [a] = first.g.targets as Target<FakePool>[];
    eject(a!);
    const events: GroupEvent[] = [];
    const next = new UpstreamGroup<FakePool>({
      name: "api",
      targets: [
        { origin: "http://10.0.0.1:80", host: "10.0.0.1", weight: 1, key: "k1" },
        { origin: "http://10.0.0.9:80", host: "10.0.0.9", weight: 1, key: "k9" },
      ],
      health: undefined,
      clock: () => 0,
      dispatcher: (origin) => new FakePool(origin),
      probe: async () => null,
      onEvent: (e) => events.push(e),
      adopt: (spec) => first.g.targets.find((t) => t.key === spec.key),
    });
    expect(next.targets[0]).toBe(a);
    expect(next.counts()).toEqual({ healthy: 1, ejected: 1 });
    // Its events now speak for the new group.
    next.targets[0]!.health.checkPassed();
    expect(events).toEqual([
      { kind: "returned", by: "active", upstream: "api", target: "http://10.0.0.1:80" },
    ]);
    expect(first.events.filter((e) => e.kind === "returned")).toEqual([]);
  });
});

describe("ActiveHealthCheck", () => {
  const settings = { path: "/healthz", intervalMs: 5000, timeoutMs: 1000 };

  it("checks every target at start and each interval; two failures eject, a pass readmits", async () => {
    const timers = new ManualTimers();
    const answers = new Map<string, string | null>();
    const { g, events } = group([1, 1], {
      health: settings,
      timers,
      probe: async (t) => answers.get(t.origin) ?? null,
    });
    answers.set("http://10.0.0.2:80", "status 503");
    g.start();
    g.start();
    await Promise.resolve();
    await Promise.resolve();
    // One failed check is not enough.
    expect(g.counts()).toEqual({ healthy: 2, ejected: 0 });
    timers.fire(5000);
    await Promise.resolve();
    await Promise.resolve();
    expect(g.counts()).toEqual({ healthy: 1, ejected: 1 });
    answers.delete("http://10.0.0.2:80");
    timers.fire(5000);
    await Promise.resolve();
    await Promise.resolve();
    expect(g.counts()).toEqual({ healthy: 2, ejected: 0 });
    expect(events.map((e) => e.kind)).toEqual(["ejected", "returned"]);
  });

  it("a check with no answer within its timeout fails, aborted", async () => {
    const timers = new ManualTimers();
    let signal: AbortSignal | undefined;
    const check = new ActiveHealthCheck(
      ["t"],
      () => health,
      settings,
      (_t, _s, s) => {
        signal = s;
        return new Promise((_resolve, reject) => s.addEventListener("abort", () => reject(s.reason)));
      },
      timers,
    );
    const failed: string[] = [];
    const health = { checkPassed: () => failed.push("passed"), checkFailed: (r: string) => failed.push(r) };
    check.start();
    timers.fire(1000);
    await new Promise((r) => setImmediate(r));
    expect(signal?.aborted).toBe(true);
    expect(failed).toEqual(["no answer within 1000 ms"]);
    check.stop();
  });

  it("stop() leaves no timer behind and ignores checks that end after it", async () => {
    const timers = new ManualTimers();
    let finish: (v: string | null) => void = () => {};
    const results: string[] = [];
    const check = new ActiveHealthCheck(
      ["t"],
      () => ({ checkPassed: () => results.push("passed"), checkFailed: (r: string) => results.push(r) }),
      settings,
      () => new Promise((resolve) => (finish = resolve)),
      timers,
    );
    check.start();
    expect(timers.pending.size).toBe(2);
    check.stop();
    expect(timers.pending.size).toBe(0);
    finish(null);
    await new Promise((r) => setImmediate(r));
    expect(results).toEqual([]);
    check.start();
    expect(timers.pending.size).toBe(0);
  });
});
