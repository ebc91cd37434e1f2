// Budget alerts without a socket, Redis or the wall clock: which crossings a charge makes, the
// signature a receiver checks, and the service's raise → queue → send → retry loop over the
// in-process queue, two "instances" sharing it.
import { createHmac } from "node:crypto";
import { pino } from "pino";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Alerts, type BudgetCrossing } from "../../src/alerts/alerts.js";
import type { Sent } from "../../src/alerts/deliver.js";
import { alertId, crossings, signature } from "../../src/alerts/events.js";
import { type AlertQueue, type Delivery, MemoryAlertQueue } from "../../src/alerts/queue.js";
import { type AlertSettings, compileAlerts, retryDelayMs, targetsOf } from "../../src/alerts/settings.js";
import { Metrics } from "../../src/observability/metrics.js";
import { Lines } from "./support/fake-http.js";

describe("crossings", () => {
  const t = [0.5, 0.8, 1];
  it("names each threshold a charge passed, and exhausted at the quota", () => {
    expect(crossings(t, 100, 0, 49)).toEqual([]);
    expect(crossings(t, 100, 49, 50)).toEqual([{ event: "budget.threshold", threshold: 0.5 }]);
    expect(crossings(t, 100, 0, 100)).toEqual([
      { event: "budget.threshold", threshold: 0.5 },
      { event: "budget.threshold", threshold: 0.8 },
      { event: "budget.threshold", threshold: 1 },
      { event: "budget.exhausted", threshold: 1 },
    ]);
    expect(crossings(t, 100, 79, 120)).toEqual([
      { event: "budget.threshold", threshold: 0.8 },
      { event: "budget.threshold", threshold: 1 },
      { event: "budget.exhausted", threshold: 1 },
    ]);
  });
  it("crosses nothing once past, going back, or without a quota", () => {
    expect(crossings(t, 100, 100, 150)).toEqual([]);
    expect(crossings(t, 100, 60, 40)).toEqual([]);
    expect(crossings(t, 0, 0, 10)).toEqual([]);
    // A threshold of a tiny quota is at least one unit: the first request crosses it.
    expect(crossings([0.1], 3, 0, 1)).toEqual([{ event: "budget.threshold", threshold: 0.1 }]);
  });
});

describe("event ids and signatures", () => {
  it("one id per budget key, period, event and threshold", () => {
    const a = alertId("k", "2026-12", { event: "budget.threshold", threshold: 0.8 });
    expect(alertId("k", "2026-12", { event: "budget.threshold", threshold: 0.8 })).toBe(a);
    expect(alertId("k", "2026-12", { event: "budget.threshold", threshold: 0.5 })).not.toBe(a);
    expect(alertId("k", "2027-01", { event: "budget.threshold", threshold: 0.8 })).not.toBe(a);
    expect(alertId("k2", "2026-12", { event: "budget.threshold", threshold: 0.8 })).not.toBe(a);
    expect(alertId("k", "2026-12", { event: "budget.exhausted", threshold: 0.8 })).not.toBe(a);
  });
  it("signs as a receiver checks: HMAC-SHA256 of '<t>.<body>'", () => {
    const body = '{"id":"x"}';
    const header = signature("s3cret", body, 1_800_000_000);
    const [t, v1] = header.split(",").map((p) => p.split("=")[1]);
    expect(t).toBe("1800000000");
    expect(v1).toBe(createHmac("sha256", "s3cret").update(`1800000000.${body}`).digest("hex"));
  });
});

describe("retry delays", () => {
  const retry = { firstMs: 1000, maxDelayMs: 10_000, maxAttempts: 5 };
  it("doubles from the first, capped, within ±20 %", () => {
    expect([1, 2, 3, 4, 5, 6].map((n) => retryDelayMs(retry, n, () => 0.5))).toEqual([
      1000, 2000, 4000, 8000, 10_000, 10_000,
    ]);
    expect(retryDelayMs(retry, 1, () => 0)).toBe(800);
    expect(retryDelayMs(retry, 1, () => 0.999_999)).toBe(1200);
  });
});

const T0 = Date.UTC(2026, 11, 30, 12);
const MONTH_END = Date.UTC(2027, 0, 1);

function settings(over: Partial<Parameters<typeof compileAlerts>[0]> = {}, tenants = {}): AlertSettings {
  return compileAlerts(
    {
      thresholds: [0.5, 0.8],
      webhooks: [
        { name: "billing", url: "http://127.0.0.1:1/a", secret: "billing-secret-0123", timeout: 1000 },
        {
          name: "ops",
          url: "http://127.0.0.1:1/b",
          secret: "ops-secret-0123456",
          events: ["budget.exhausted", "budget.reset"],
          timeout: 1000,
        },
      ],
      retry: { first: 1000, max_delay: 60_000, max_attempts: 4 },
      queue: 10_000,
      ...over,
    },
    tenants,
    0.8,
  );
}

function crossing(
  event: "budget.threshold" | "budget.exhausted",
  threshold: number,
  key = "p:{c:alice}:k",
): BudgetCrossing {
  return {
    budgetKey: key,
    caller: "client:alice",
    tenant: "acme",
    limit: "pro.chat",
    unit: "tokens",
    quota: 1000,
    used: event === "budget.exhausted" ? 1000 : 800,
    period: "2026-12",
    periodEndMs: MONTH_END,
    nextPeriod: "2027-01",
    atMs: T0,
    crossing: { event, threshold },
  };
}

interface Harness {
  clock: { now: number };
  queue: MemoryAlertQueue;
  sends: { target: string; d: Delivery }[];
  instances: Alerts[];
  metrics: Metrics;
  lines: Lines;
  /** What the receiver answers next: true (2xx) or false. */
  answers: boolean[];
  current: { settings: AlertSettings };
  tickAll(): Promise<void>;
}

// Every harness instance, stopped after its test. A tick() ends by scheduling the next poll, a
// real timer that re-arms itself every second (Alerts.tickOnce → schedule) even on an instance
// never start()ed. Left running, such polls outlive their file: the unit files share a worker
// (isolate: false), and a poll that fires while a later file has fake timers installed re-arms
// into the fake clock, where vi.runAllTimersAsync() runs it 10 000 times and gives up.
const live: Alerts[] = [];
afterEach(async () => {
  await Promise.all(live.splice(0).map((a) => a.stop()));
});

function harness(s = settings(), count = 2, queueOf?: (q: MemoryAlertQueue) => AlertQueue): Harness {
  const clock = { now: T0 };
  const queue = new MemoryAlertQueue(
    () => current.settings.queueMax,
    () => clock.now,
  );
  const sends: Harness["sends"] = [];
  const answers: boolean[] = [];
  const metrics = new Metrics();
  const lines = new Lines();
  const logger = pino({ level: "info" }, lines);
  const current = { settings: s };
  const instances = Array.from(
    { length: count },
    () =>
      new Alerts({
        queue: queueOf ? queueOf(queue) : queue,
        settings: () => current.settings,
        send: async (target, d): Promise<Sent> => {
          sends.push({ target: target.id, d });
          return (answers.shift() ?? true) ? { ok: true, status: 204 } : { ok: false, why: "answered 500" };
        },
        logger,
        metrics,
        onError: () => {},
        now: () => clock.now,
      }),
  );
  live.push(...instances);
  return {
    clock,
    queue,
    sends,
    instances,
    metrics,
    lines,
    answers,
    current,
    async tickAll() {
      // raise() is fire-and-forget: let its queue call land first.
      await new Promise((r) => setImmediate(r));
      for (const i of instances) await i.tick();
    },
  };
}

async function metric(metrics: Metrics, name: string): Promise<Record<string, number>> {
  const m = await metrics.registry.getSingleMetric(name)!.get();
  return Object.fromEntries(m.values.map((v) => [Object.values(v.labels).join("/"), v.value]));
}

describe("the alert service", () => {
  it("sends an event raised by two instances once to each target that takes it, signed with the target's secret", async () => {
    const h = harness();
    const [a, b] = h.instances;
    a!.raise(crossing("budget.threshold", 0.8));
    b!.raise(crossing("budget.threshold", 0.8));
    a!.raise(crossing("budget.threshold", 0.8));
    await h.tickAll();
    await h.tickAll();
    expect(h.sends.map((s) => s.target)).toEqual(["webhook:billing"]);
    const body = JSON.parse(h.sends[0]!.d.body);
    expect(body).toEqual({
      id: alertId("p:{c:alice}:k", "2026-12", { event: "budget.threshold", threshold: 0.8 }),
      event: "budget.threshold",
      caller: "client:alice",
      tenant: "acme",
      limit: "pro.chat",
      period: "2026-12",
      unit: "tokens",
      used: 800,
      quota: 1000,
      threshold: 0.8,
      time: new Date(T0).toISOString(),
    });
    const logged = h.lines.lines.filter((l) => String(l.msg).startsWith("budget alert"));
    expect(logged.map((l) => l.msg)).toEqual([
      'budget alert: "pro.chat" passed 80 % of its 1000 for 2026-12',
    ]);
    expect(await metric(h.metrics, "tollgate_budget_alerts_total")).toEqual({
      "pro.chat/budget.threshold": 1,
    });
    expect(await metric(h.metrics, "tollgate_alert_deliveries_total")).toEqual({ "billing/sent": 1 });
  });

  it("retries a failed delivery with backoff, the same body each time, until it is sent", async () => {
    const h = harness();
    h.answers.push(false, false, false);
    h.instances[0]!.raise(crossing("budget.threshold", 0.5));
    await h.tickAll();
    expect(h.sends).toHaveLength(1);
    // Not due again before its backoff.
    await h.tickAll();
    expect(h.sends).toHaveLength(1);
    for (const wait of [1200, 2400, 4800]) {
      h.clock.now += wait;
      await h.tickAll();
    }
    expect(h.sends).toHaveLength(4);
    expect(new Set(h.sends.map((s) => s.d.body)).size).toBe(1);
    expect(h.sends.map((s) => s.d.attempts)).toEqual([0, 1, 2, 3]);
    expect(await metric(h.metrics, "tollgate_alert_deliveries_total")).toEqual({
      "billing/retried": 3,
      "billing/sent": 1,
    });
    expect(await h.queue.size()).toBe(0);
  });

  it("drops a delivery after max_attempts, and one whose target left the config, counting both", async () => {
    const h = harness();
    h.answers.push(false, false, false, false);
    h.instances[0]!.raise(crossing("budget.threshold", 0.5));
    for (let i = 0; i < 6; i++) {
      await h.tickAll();
      h.clock.now += 60_000;
    }
    expect(h.sends).toHaveLength(4);
    expect(await h.queue.size()).toBe(0);
    h.instances[0]!.raise(crossing("budget.threshold", 0.8));
    await new Promise((r) => setImmediate(r));
    h.current.settings = settings({
      webhooks: [{ name: "other", url: "http://127.0.0.1:1/c", secret: "x".repeat(20), timeout: 1000 }],
    });
    await h.tickAll();
    expect(h.sends).toHaveLength(4);
    expect(await metric(h.metrics, "tollgate_alert_deliveries_total")).toEqual({
      "billing/retried": 3,
      "billing/dropped": 2,
    });
    expect(h.lines.lines.some((l) => String(l.msg).includes("max_attempts"))).toBe(true);
    expect(h.lines.lines.some((l) => String(l.msg).includes("no longer configured"))).toBe(true);
  });

  it("queues a spent budget's reset for the end of its period, to those that take it", async () => {
    const h = harness();
    h.instances[0]!.raise(crossing("budget.exhausted", 1));
    await h.tickAll();
    expect(h.sends.map((s) => `${s.target} ${s.d.event}`).sort()).toEqual([
      "webhook:billing budget.exhausted",
      "webhook:ops budget.exhausted",
    ]);
    h.clock.now = MONTH_END - 1;
    await h.tickAll();
    expect(h.sends).toHaveLength(2);
    h.clock.now = MONTH_END;
    await h.tickAll();
    expect(h.sends).toHaveLength(3);
    expect(h.sends[2]!.target).toBe("webhook:ops");
    expect(JSON.parse(h.sends[2]!.d.body)).toMatchObject({
      event: "budget.reset",
      period: "2027-01",
      used: 0,
      threshold: 0,
      time: new Date(MONTH_END).toISOString(),
    });
  });

  it("delivers a tenant's events to its own URL too, and only its own", async () => {
    const s = settings(
      { webhooks: [] },
      {
        acme: {
          alert_url: "http://127.0.0.1:1/acme",
          alert_secret: "acme-secret-012345",
          alert_timeout: 1000,
        },
        other: { alert_url: "http://127.0.0.1:1/o", alert_secret: "other-secret-01234", alert_timeout: 1000 },
      },
    );
    expect(targetsOf(s, "budget.threshold", "acme").map((t) => t.id)).toEqual(["tenant:acme"]);
    expect(targetsOf(s, "budget.threshold", undefined)).toEqual([]);
    expect(targetsOf(s, "budget.reset", "acme")).toEqual([]);
    const h = harness(s);
    h.instances[0]!.raise(crossing("budget.threshold", 0.5));
    await h.tickAll();
    expect(h.sends.map((x) => x.target)).toEqual(["tenant:acme"]);
    expect(await metric(h.metrics, "tollgate_alert_deliveries_total")).toEqual({ "tenant/sent": 1 });
  });

  it("keeps an event the store could not take and raises it at a later tick, once, however often it recurs", async () => {
    let failing = 2;
    let calls = 0;
    const h = harness(settings(), 1, (q) => ({
      raise: (r) => {
        calls++;
        return failing-- > 0 ? Promise.reject(new Error("store down")) : q.raise(r);
      },
      claim: (n, k) => q.claim(n, k),
      done: (id) => q.done(id),
      retry: (d, due) => q.retry(d, due),
      size: () => q.size(),
    }));
    // A budget refusing request after request while the store is down: one event waiting.
    for (let i = 0; i < 50; i++) h.instances[0]!.raise(crossing("budget.exhausted", 1));
    await new Promise((r) => setImmediate(r));
    for (let i = 0; i < 50; i++) h.instances[0]!.raise(crossing("budget.exhausted", 1));
    expect(calls).toBe(1);
    await h.tickAll(); // second failure: still waiting
    expect(h.sends).toHaveLength(0);
    await h.tickAll();
    expect(calls).toBe(3);
    expect(h.sends.map((s) => s.target).sort()).toEqual(["webhook:billing", "webhook:ops"]);
    await h.tickAll();
    for (let i = 0; i < 50; i++) h.instances[0]!.raise(crossing("budget.exhausted", 1));
    expect(calls).toBe(3);
    expect(h.sends).toHaveLength(2);
  });

  it("drops and counts deliveries past the queue's bound", async () => {
    const h = harness(settings({ queue: 100 }), 1);
    for (let i = 0; i < 102; i++) h.instances[0]!.raise(crossing("budget.threshold", 0.5, `k${i}`));
    await new Promise((r) => setImmediate(r));
    expect(await h.queue.size()).toBe(100);
    expect(await metric(h.metrics, "tollgate_alert_deliveries_total")).toEqual({ "billing/dropped": 2 });
    expect(h.lines.lines.filter((l) => String(l.msg).includes("queue is full"))).toHaveLength(2);
  });

  it("has no thresholds when alert_at is false and none are set; sorts and dedupes those written", () => {
    const retry = { first: 1000, max_delay: 1000, max_attempts: 1 };
    expect(compileAlerts({ webhooks: [], retry, queue: 100 }, {}, false).thresholds).toEqual([]);
    expect(compileAlerts({ webhooks: [], retry, queue: 100 }, {}, 0.8).thresholds).toEqual([0.8]);
    expect(
      compileAlerts({ thresholds: [0.8, 0.5, 0.8], webhooks: [], retry, queue: 100 }, {}, 0.9).thresholds,
    ).toEqual([0.5, 0.8]);
  });
});

describe("a receiver that hangs", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("holds at most its own share of the sends: the other target's deliveries go at once, and its own later, each once", async () => {
    const clock = { now: T0 };
    const s = settings();
    const queue = new MemoryAlertQueue(
      () => s.queueMax,
      () => clock.now,
    );
    const sent: { target: string; id: string }[] = [];
    const hanging: (() => void)[] = [];
    let hangs = true;
    let maxHanging = 0;
    const alerts = new Alerts({
      queue,
      settings: () => s,
      send: async (target, d): Promise<Sent> => {
        if (target.id === "webhook:billing" && hangs) {
          await new Promise<void>((r) => {
            hanging.push(r);
            maxHanging = Math.max(maxHanging, hanging.length);
          });
        }
        sent.push({ target: target.id, id: JSON.parse(d.body).id });
        return { ok: true, status: 204 };
      },
      logger: pino({ level: "silent" }),
      metrics: new Metrics(),
      onError: () => {},
      now: () => clock.now,
    });
    const KEYS = 20;
    // The polls (every second: retry.first) in virtual time. They used to be real, and the
    // waits below 100 real steps of 20 ms: two polls were needed after the release, the
    // second due at about 2 s, and whether its sends landed before the last step was a race
    // (lost every time in a file run alone).
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout"] });
    alerts.start();
    for (let i = 0; i < KEYS; i++) alerts.raise(crossing("budget.exhausted", 1, `p:{c:k${i}}:k`));
    const until = async (done: () => boolean, step = () => {}) => {
      for (let i = 0; i < 100 && !done(); i++) {
        step();
        await vi.advanceTimersByTimeAsync(100);
      }
    };
    const to = (t: string) => sent.filter((x) => x.target === t);
    await until(() => to("webhook:ops").length === KEYS);
    // Every ops delivery went while billing's hung, and billing held no more than its share.
    expect(to("webhook:ops").length).toBe(KEYS);
    expect(to("webhook:billing").length).toBe(0);
    expect(maxHanging).toBe(8);

    hangs = false;
    for (const release of hanging.splice(0)) release();
    // Those sent back to wait are due a poll later: step the clock (well within the lease).
    await until(
      () => to("webhook:billing").length === KEYS,
      () => {
        clock.now += 300;
      },
    );
    await alerts.stop();
    expect(new Set(to("webhook:billing").map((x) => x.id)).size).toBe(KEYS);
    expect(to("webhook:billing").length).toBe(KEYS);
    expect(clock.now - T0).toBeLessThan(30_000);
  });
});
