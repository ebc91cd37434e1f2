// Budget alerts, from the crossing a request made to the webhooks that hear of it: each event is
// raised once across every instance (the queue's claim), its deliveries queued beside the store
// and sent by whichever instance claims them, retried with backoff until a 2xx or
// alerts.retry.max_attempts (queue.ts holds the layout and the guarantees).
//
// The request path only calls raise(), which never throws and never waits: an event the store
// could not take (Redis down) waits here, in memory, and is raised again on each tick until the
// store answers; an instance that stops before then loses it (logged with how many). An event this
// instance raised is remembered until its period ends, so a budget refusing request after request
// costs the store one claim, not one per refusal.
import type { Logger } from "pino";
import type { Metrics } from "../observability/metrics.js";
import type { Send } from "./deliver.js";
import { type AlertBody, type AlertEvent, alertId, type Crossing } from "./events.js";
import type { AlertQueue, Delivery, Raise } from "./queue.js";
import { type AlertSettings, retryDelayMs, targetById, targetsOf } from "./settings.js";

/** Deliveries one tick claims at most (sent at once). */
const CLAIM_BATCH = 16;

/**
 * Deliveries sent at once by an instance, and to one target: a receiver that hangs holds its
 * own share until its timeout, never the others' (measured before: one hanging receiver delayed
 * every other by its timeout, each tick waiting for the slowest send).
 */
export const MAX_SENDING = 64;
export const MAX_SENDING_PER_TARGET = 8;
/** Events waiting for the store at most; past it the oldest is lost (and counted). */
const PENDING_MAX = 1000;
/** Events this instance remembers having raised, at most. */
const RAISED_MEMO_MAX = 10_000;

/** One crossing of one calendar budget, as the request path saw it. */
export interface BudgetCrossing {
  /** The budget's store key for this caller: what makes the event one per caller and budget. */
  budgetKey: string;
  caller: string;
  tenant: string | undefined;
  limit: string;
  unit: AlertBody["unit"];
  /** In the budget's unit (dollars for usd). */
  quota: number;
  used: number;
  period: string;
  /** When the period ends (epoch ms), and the period that starts then: a reset's. */
  periodEndMs: number;
  nextPeriod: string;
  atMs: number;
  crossing: Crossing;
}

export interface AlertsOptions {
  queue: AlertQueue;
  settings: () => AlertSettings;
  send: Send;
  logger: Logger;
  metrics: Metrics;
  /** A store failure of the queue (counted and logged as the ledger's are). */
  onError: (err: Error) => void;
  now?: () => number;
}

export class Alerts {
  /** Events the store could not take, by id (insertion order: the oldest first), to raise again. */
  private readonly pending = new Map<string, { r: Raise; c: BudgetCrossing }>();
  /** Events being raised right now: a burst of refusals of one budget raises it once. */
  private readonly raising = new Set<string>();
  private readonly raised = new Map<string, number>();
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;
  private readonly sending = new Set<Promise<void>>();
  private readonly sendingTo = new Map<string, number>();
  /** Until start(), and after stop(): a tick() asked for by hand arms no poll after it. */
  private stopped = true;
  private readonly now: () => number;

  constructor(private readonly options: AlertsOptions) {
    this.now = options.now ?? Date.now;
  }

  /** Queues the event's deliveries, once across every instance. Never throws, never waits. */
  raise(c: BudgetCrossing): void {
    try {
      const eventId = alertId(c.budgetKey, c.period, c.crossing);
      const until = this.raised.get(eventId);
      if (until !== undefined && until > this.now()) return;
      if (this.raising.has(eventId) || this.pending.has(eventId)) return;
      void this.submit(this.raiseOf(eventId, c), c);
    } catch (err) {
      this.options.logger.error({ err }, "budget alert not raised");
    }
  }

  private raiseOf(eventId: string, c: BudgetCrossing): Raise {
    const settings = this.options.settings();
    const deliveries: Raise["deliveries"][number][] = [];
    const body: AlertBody = {
      id: eventId,
      event: c.crossing.event,
      caller: c.caller,
      tenant: c.tenant ?? null,
      limit: c.limit,
      period: c.period,
      unit: c.unit,
      used: c.used,
      quota: c.quota,
      threshold: c.crossing.threshold,
      time: new Date(c.atMs).toISOString(),
    };
    const add = (event: AlertEvent, b: AlertBody, dueMs: number) => {
      const text = JSON.stringify(b);
      for (const t of targetsOf(settings, event, c.tenant)) {
        const delivery: Delivery = { id: `${b.id}:${t.id}`, target: t.id, event, body: text, attempts: 0 };
        deliveries.push({ delivery, dueMs });
      }
    };
    add(c.crossing.event, body, c.atMs);
    if (c.crossing.event === "budget.exhausted") {
      // The period that ends gives the budget back: those that heard it was spent hear so too.
      const reset: AlertBody = {
        ...body,
        id: alertId(c.budgetKey, c.period, { event: "budget.reset", threshold: 0 }),
        event: "budget.reset",
        period: c.nextPeriod,
        used: 0,
        threshold: 0,
        time: new Date(c.periodEndMs).toISOString(),
      };
      add("budget.reset", reset, c.periodEndMs);
    }
    return { eventId, untilMs: c.periodEndMs, deliveries };
  }

  /** One try at the store; an event it could not take waits for the next tick. */
  private async submit(r: Raise, c: BudgetCrossing): Promise<boolean> {
    this.raising.add(r.eventId);
    try {
      const result = await this.options.queue.raise(r);
      this.remember(r.eventId, r.untilMs);
      if (result.first) this.announce(c);
      if (result.dropped > 0) {
        this.options.logger.warn(
          { limit: c.limit, period: c.period, event: c.crossing.event, dropped: result.dropped },
          "alert deliveries dropped: the alert queue is full (alerts.queue)",
        );
        for (const d of r.deliveries.slice(r.deliveries.length - result.dropped))
          this.count(d.delivery.target, "dropped");
      }
      if (result.queued > 0) this.kick();
      return true;
    } catch (err) {
      this.options.onError(err instanceof Error ? err : new Error(String(err)));
      if (!this.pending.has(r.eventId)) {
        if (this.pending.size >= PENDING_MAX) {
          const [oldest, lost] = this.pending.entries().next().value!;
          this.pending.delete(oldest);
          for (const d of lost.r.deliveries) this.count(d.delivery.target, "dropped");
        }
        this.pending.set(r.eventId, { r, c });
      }
      return false;
    } finally {
      this.raising.delete(r.eventId);
    }
  }

  private remember(eventId: string, untilMs: number): void {
    if (this.raised.size >= RAISED_MEMO_MAX) {
      const now = this.now();
      for (const [id, until] of this.raised) if (until <= now) this.raised.delete(id);
      if (this.raised.size >= RAISED_MEMO_MAX) this.raised.clear();
    }
    this.raised.set(eventId, untilMs);
  }

  /** The event, raised here first: one log line and one count, whichever instance delivers it. */
  private announce(c: BudgetCrossing): void {
    this.options.metrics.budgetAlerts.labels(c.limit, c.crossing.event).inc();
    const amount = (n: number) => (c.unit === "usd" ? `$${n}` : `${n}`);
    const what =
      c.crossing.event === "budget.exhausted"
        ? `is spent (${amount(c.used)} of ${amount(c.quota)})`
        : `passed ${Math.round(c.crossing.threshold * 100)} % of its ${amount(c.quota)}`;
    this.options.logger.warn(
      {
        event: c.crossing.event,
        caller: c.caller,
        ...(c.tenant !== undefined ? { tenant: c.tenant } : {}),
        limit: c.limit,
        period: c.period,
        used: c.used,
        quota: c.quota,
        threshold: c.crossing.threshold,
      },
      `budget alert: "${c.limit}" ${what} for ${c.period}`,
    );
  }

  /** Starts sending: a tick now and then, sooner after a raise. */
  start(): void {
    this.stopped = false;
    this.schedule();
  }

  private pollMs(): number {
    return Math.min(1000, Math.max(250, this.options.settings().retry.firstMs));
  }

  private schedule(delayMs = this.pollMs()): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.runTick(), delayMs);
    this.timer.unref();
  }

  /** A raise queued something: send it now rather than at the next poll. */
  private kick(): void {
    if (this.timer !== undefined && !this.stopped && this.ticking === undefined) this.schedule(0);
  }

  /** A tick, and the sends it started: what a test or a shutdown waits for. */
  async tick(): Promise<void> {
    await this.runTick();
    await this.sent();
  }

  /** Resolves once no delivery is being sent. */
  async sent(): Promise<void> {
    while (this.sending.size > 0) await Promise.allSettled([...this.sending]);
  }

  /** Raises what waited for the store, then starts sending what is due. One at a time. */
  private runTick(): Promise<void> {
    if (this.ticking) return this.ticking;
    this.ticking = this.tickOnce().finally(() => {
      this.ticking = undefined;
    });
    return this.ticking;
  }

  private async tickOnce(): Promise<void> {
    let more = false;
    try {
      for (const [id, { r, c }] of [...this.pending]) {
        this.pending.delete(id);
        if (!(await this.submit(r, c))) break;
      }
      const settings = this.options.settings();
      // No receiver configured: what waits stays queued for a config that names one again.
      if (settings.webhooks.length > 0 || settings.tenants.size > 0) {
        const room = Math.min(CLAIM_BATCH, MAX_SENDING - this.sending.size);
        const due = room > 0 ? await this.options.queue.claim(this.now(), room) : [];
        let started = 0;
        for (const d of due) {
          if ((this.sendingTo.get(d.target) ?? 0) >= MAX_SENDING_PER_TARGET) {
            // Its target is busy with as many as it may be: back to the queue, no try counted.
            await this.options.queue.retry(d, this.now() + this.pollMs());
            continue;
          }
          this.startSending(d, settings);
          started++;
        }
        more = due.length === room && started > 0 && this.sending.size < MAX_SENDING;
      }
    } catch (err) {
      this.options.onError(err instanceof Error ? err : new Error(String(err)));
    } finally {
      this.schedule(more ? 0 : undefined);
    }
  }

  private startSending(d: Delivery, settings: AlertSettings): void {
    this.sendingTo.set(d.target, (this.sendingTo.get(d.target) ?? 0) + 1);
    const sending: Promise<void> = this.deliver(d, settings)
      .catch((err: unknown) => this.options.onError(err instanceof Error ? err : new Error(String(err))))
      .finally(() => {
        this.sending.delete(sending);
        const left = (this.sendingTo.get(d.target) ?? 1) - 1;
        if (left > 0) this.sendingTo.set(d.target, left);
        else this.sendingTo.delete(d.target);
        // A place freed: what waits for it goes now, not at the next poll.
        this.kick();
      });
    this.sending.add(sending);
  }

  private async deliver(d: Delivery, settings: AlertSettings): Promise<void> {
    const { queue, logger } = this.options;
    const target = targetById(settings, d.target);
    if (!target) {
      logger.warn(
        { target: d.target, event: d.event },
        "alert delivery dropped: its target is no longer configured",
      );
      this.count(d.target, "dropped");
      await queue.done(d.id);
      return;
    }
    const sent = await this.options.send(target, d);
    if (sent.ok) {
      await queue.done(d.id);
      this.count(target.label, "sent");
      return;
    }
    const attempts = d.attempts + 1;
    const fields = { target: target.id, event: d.event, attempts, why: sent.why };
    if (attempts >= settings.retry.maxAttempts) {
      await queue.done(d.id);
      this.count(target.label, "dropped");
      logger.error(fields, "alert delivery dropped after its last try (alerts.retry.max_attempts)");
      return;
    }
    const delay = retryDelayMs(settings.retry, attempts);
    await queue.retry({ ...d, attempts }, this.now() + delay);
    this.count(target.label, "retried");
    logger.warn({ ...fields, retry_in_ms: delay }, "alert delivery failed; retrying");
  }

  private count(target: string, result: "sent" | "retried" | "dropped"): void {
    const label = target.startsWith("webhook:")
      ? target.slice(8)
      : target.startsWith("tenant:")
        ? "tenant"
        : target;
    this.options.metrics.alertDeliveries.labels(label, result).inc();
  }

  /** Stops the ticks, lets the one in progress end; says what never reached the store. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.ticking;
    await this.sent();
    if (this.pending.size > 0)
      this.options.logger.warn(
        { events_lost: this.pending.size },
        "budget alerts not raised: the store never answered before the gateway stopped",
      );
  }
}
