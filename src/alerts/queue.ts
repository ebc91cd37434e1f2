// Where alert deliveries wait until they are sent: in the store's Redis, so a delivery queued by
// one instance is sent (and retried) by whichever instance claims it first, and outlives a
// restart of the one that queued it; in this process for `memory://`.
//
// Redis layout, under the store's prefix, one hash tag so every command of the queue is one slot
// (a Cluster included):
//   `<prefix>{alerts}:claim:<event id>`  string, until the period's end: the event was raised
//   `<prefix>{alerts}:due`               sorted set: delivery id → when it is next due (epoch ms)
//   `<prefix>{alerts}:items`             hash: delivery id → the delivery (JSON)
// Raising an event claims it and queues its deliveries in one script: an event two instances
// raise together, or one raised again after a restart, is queued once; a script Redis never ran
// queued nothing and is raised again (alerts.ts). A claim moves a delivery's due time a lease
// ahead: an instance that dies while sending leaves it to be claimed again after the lease, so a
// delivery is sent at least once, and once when its sends succeed. The queue holds at most
// `max` deliveries: past it a new one is dropped, and counted. No secret is stored: a delivery
// names its target, whose URL and secret are read from the config when it is sent.
import type { Cluster, Redis } from "ioredis";
import { Boundary } from "../limits/stores/redis/boundary.js";

/** How long a claimed delivery is another instance's to send before it can be claimed again. */
export const ALERT_LEASE_MS = 30_000;

/** One delivery: to which target (`webhook:<name>`, `tenant:<id>`), what, and how often tried. */
export interface Delivery {
  /** The event's id and its target: one per event and target. */
  id: string;
  target: string;
  event: string;
  body: string;
  attempts: number;
}

/** An event to raise once: its claim, until when it holds, and the deliveries it queues. */
export interface Raise {
  eventId: string;
  untilMs: number;
  deliveries: readonly { delivery: Delivery; dueMs: number }[];
}

export interface Raised {
  /** False: another instance (or an earlier raise) claimed the event, and nothing was queued. */
  first: boolean;
  queued: number;
  /** Deliveries the full queue refused. */
  dropped: number;
}

export interface AlertQueue {
  raise(r: Raise): Promise<Raised>;
  /** Up to `n` deliveries due at `nowMs`, each leased to the caller for ALERT_LEASE_MS. */
  claim(nowMs: number, n: number): Promise<Delivery[]>;
  /** A delivery sent, or given up: gone. */
  done(id: string): Promise<void>;
  /** A delivery to try again at `dueMs`, with its attempts so far. */
  retry(d: Delivery, dueMs: number): Promise<void>;
  /** Deliveries waiting (due or not). */
  size(): Promise<number>;
}

export class MemoryAlertQueue implements AlertQueue {
  private readonly items = new Map<string, { d: Delivery; dueMs: number }>();
  /** Raised events → until when each is claimed. */
  private readonly claims = new Map<string, number>();

  constructor(
    private readonly max: () => number,
    private readonly now: () => number = Date.now,
  ) {}

  async raise(r: Raise): Promise<Raised> {
    const now = this.now();
    if ((this.claims.get(r.eventId) ?? 0) > now) return { first: false, queued: 0, dropped: 0 };
    if (this.claims.size >= 100_000)
      for (const [k, until] of this.claims) if (until <= now) this.claims.delete(k);
    this.claims.set(r.eventId, r.untilMs);
    let queued = 0;
    let dropped = 0;
    for (const { delivery, dueMs } of r.deliveries) {
      if (this.items.has(delivery.id)) continue;
      if (this.items.size >= this.max()) dropped++;
      else {
        this.items.set(delivery.id, { d: delivery, dueMs });
        queued++;
      }
    }
    return { first: true, queued, dropped };
  }

  async claim(nowMs: number, n: number): Promise<Delivery[]> {
    const due = [...this.items.values()].filter((i) => i.dueMs <= nowMs).sort((a, b) => a.dueMs - b.dueMs);
    return due.slice(0, n).map((item) => {
      item.dueMs = nowMs + ALERT_LEASE_MS;
      return item.d;
    });
  }

  async done(id: string): Promise<void> {
    this.items.delete(id);
  }

  async retry(d: Delivery, dueMs: number): Promise<void> {
    this.items.set(d.id, { d, dueMs });
  }

  async size(): Promise<number> {
    return this.items.size;
  }
}

const RAISE = `
if not redis.call('SET', KEYS[3], '1', 'PXAT', ARGV[1], 'NX') then return {0, 0, 0} end
local max = tonumber(ARGV[2])
local queued, dropped = 0, 0
for i = 3, #ARGV, 3 do
  if redis.call('HEXISTS', KEYS[2], ARGV[i]) == 0 then
    if redis.call('ZCARD', KEYS[1]) >= max then
      dropped = dropped + 1
    else
      redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
      redis.call('ZADD', KEYS[1], ARGV[i + 2], ARGV[i])
      queued = queued + 1
    end
  end
end
return {1, queued, dropped}`;

const CLAIM = `
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local item = redis.call('HGET', KEYS[2], id)
  if item then
    redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), id)
    out[#out + 1] = item
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out`;

export interface RedisAlertQueueOptions {
  client: Redis | Cluster;
  /** The store's key prefix, read at each call so a reload applies. */
  prefix: () => string;
  /** Deliveries waiting at most (alerts.queue). */
  max: () => number;
  /** Each call's deadline (store.timeout). */
  timeoutMs: number;
}

export class RedisAlertQueue implements AlertQueue {
  private readonly client: Redis | Cluster;
  private readonly boundary: Boundary;

  constructor(private readonly options: RedisAlertQueueOptions) {
    this.client = options.client;
    this.boundary = new Boundary(options.timeoutMs);
  }

  private keys(): { due: string; items: string; claim: (id: string) => string } {
    const p = this.options.prefix();
    return {
      due: `${p}{alerts}:due`,
      items: `${p}{alerts}:items`,
      claim: (id) => `${p}{alerts}:claim:${id}`,
    };
  }

  async raise(r: Raise): Promise<Raised> {
    const k = this.keys();
    const args: (string | number)[] = [Math.ceil(r.untilMs), this.options.max()];
    for (const { delivery, dueMs } of r.deliveries) args.push(delivery.id, JSON.stringify(delivery), dueMs);
    const reply = (await this.boundary.bounded(
      this.client.eval(RAISE, 3, k.due, k.items, k.claim(r.eventId), ...args),
    )) as number[];
    return { first: reply[0] === 1, queued: Number(reply[1]), dropped: Number(reply[2]) };
  }

  async claim(nowMs: number, n: number): Promise<Delivery[]> {
    const k = this.keys();
    const reply = (await this.boundary.bounded(
      this.client.eval(CLAIM, 2, k.due, k.items, nowMs, ALERT_LEASE_MS, n),
    )) as string[];
    const out: Delivery[] = [];
    for (const text of reply) {
      try {
        out.push(JSON.parse(text) as Delivery);
      } catch {
        // Not one this version wrote: left to its lease, never sent half-read.
      }
    }
    return out;
  }

  async done(id: string): Promise<void> {
    const k = this.keys();
    await this.boundary.bounded(this.client.multi().zrem(k.due, id).hdel(k.items, id).exec());
  }

  async retry(d: Delivery, dueMs: number): Promise<void> {
    const k = this.keys();
    await this.boundary.bounded(
      this.client.multi().hset(k.items, d.id, JSON.stringify(d)).zadd(k.due, dueMs, d.id).exec(),
    );
  }

  async size(): Promise<number> {
    return this.boundary.bounded(this.client.zcard(this.keys().due));
  }
}
