// How every instance learns that an operator changed runtime state (a key created, revoked or
// rotated; an override set or removed; limit state reset), so each can drop what it cached
// about it.
//
// With Redis, a change is recorded twice: XADD to the change stream `<prefix>{rt}:changes`
// (MAXLEN ~ CHANGE_STREAM_MAX) and PUBLISH on `<prefix>rt:changes`, the message carrying the
// stream id. Each instance subscribes on its own connection (a duplicate of the store's; with a
// Redis Cluster, a duplicate Cluster: classic pub/sub reaches every node's subscribers) and
// hears a change within a round trip. Pub/sub drops messages while a subscriber is
// disconnected, so every RECONCILE_INTERVAL_MS each instance also reads the stream from its
// cursor with XRANGE: a lost message is applied at most that late. The stream is the truth;
// pub/sub only makes it fast.
//
// The cursor is the id of the last stream entry this instance read, and reconcile reads from it
// inclusively: while that entry still exists, nothing after it can have been trimmed. When it is
// gone, the stream was trimmed past us (more than CHANGE_STREAM_MAX changes since we last read)
// or vanished (Redis restarted empty): changes may have been missed, so onReset tells the
// caches to drop everything. While there is no stream (nobody changed anything yet, or since a
// restart) nothing is written to make one: the reconcile then resets if a change it heard is
// no longer in the stream, or if the stream it finds may have been trimmed already (missed()).
//
// None of that notices a restart that left no trace in the stream: an instance whose last read
// found no stream, and that cached a key by lookup while the key's pub/sub message was lost,
// sees no stream again after Redis restarted empty, and would serve that key forever. So Redis
// also holds an epoch, `<prefix>{rt}:epoch`: a random value that every reconcile creates if it
// is missing and reads, in one script. Each instance remembers the epoch it last saw;
// a missing or different one means Redis lost its data since (restarted empty, flushed, or the
// key was evicted): onReset, and the new epoch is adopted. That costs one command per
// reconcile and holds whatever pub/sub did. An instance started after the restart adopts the
// epoch it finds (or creates); the older instances see that one differ from theirs.
//
// "At most once each": an entry heard by pub/sub (or published here) is remembered until the
// reconcile passes it, and the reconcile does not deliver it again. The memory is bounded
// (DELIVERED_MAX); past it a change may be delivered twice, which only invalidates twice.
//
// `memory://` has an in-process feed: a change reaches this process's listeners at once, and no
// other process (there is no other instance sharing a memory store). Its data lives exactly as
// long as its listeners, so it never resets and has no epoch.
//
// Nothing here rejects unobserved: the reconcile reports its failures, the subscriber's errors
// are reported, and its SUBSCRIBE after every reconnect is ours (ioredis' autoResubscribe sends
// one nobody handles: a hung or killed Redis made it an unhandled "Command timed out").

import { randomUUID } from "node:crypto";
import { Cluster, type Redis } from "ioredis";
import { storedObject } from "./stored-json.js";

export type Change =
  | { kind: "key"; hash: string }
  | { kind: "override"; caller: string }
  /** Limit state an operator reset (DELETE /admin/callers, /admin/limits): the keys deleted. */
  | { kind: "reset"; keys: string[] };

export interface ChangeFeed {
  /** Records a change (XADD to the stream + PUBLISH), after the write it describes. */
  publish(change: Change): Promise<void>;
  /** Called for every change any instance published (this one included), at most once each. */
  onChange(listener: (change: Change) => void): void;
  /** Called when changes may have been missed (stream trimmed past our cursor, Redis restarted
   *  empty): drop every cached entry. */
  onReset(listener: () => void): void;
  start(): void;
  stop(): Promise<void>;
}

/** The stated bound on how late a change is applied when its pub/sub message was lost. */
export const RECONCILE_INTERVAL_MS = 5000;

/** The change stream keeps about this many entries (MAXLEN ~): 5 s of changes at 2,000/s. */
export const CHANGE_STREAM_MAX = 10_000;

/** Entries one XRANGE call reads; a reconcile reads pages until it is level with the stream. */
const RECONCILE_PAGE = 1000;

/** Ids heard ahead of the reconcile, remembered at most (past it, a change may arrive twice). */
export const DELIVERED_MAX = 10_000;

/** The change stream and the channel, under the store's prefix (one `{rt}` hash tag for keys). */
export function changeStreamKey(prefix: string): string {
  return `${prefix}{rt}:changes`;
}

/** The epoch: a random value that changes when Redis lost its data (see above). */
export function epochKey(prefix: string): string {
  return `${prefix}{rt}:epoch`;
}

/**
 * The epoch's TTL, pushed back by every reconcile: like every key tollgate writes, it goes away
 * once nobody uses it. It only lapses when no instance reconciled for that long; the next to
 * reconcile then creates another and the others reset (harmless: nothing was missed).
 */
export const EPOCH_TTL_MS = 24 * 3600 * 1000;

/** Creates the epoch if it is missing, pushes back its TTL; answers the one in Redis. */
const EPOCH_SCRIPT = `local v = redis.call('GET', KEYS[1])
if v then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return v
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]`;

export function changeChannel(prefix: string): string {
  return `${prefix}rt:changes`;
}

/** A change as one stream field / message text. */
export function encodeChange(change: Change): string {
  switch (change.kind) {
    case "key":
      return JSON.stringify({ k: "key", h: change.hash });
    case "override":
      return JSON.stringify({ k: "override", c: change.caller });
    case "reset":
      return JSON.stringify({ k: "reset", ks: change.keys });
  }
}

/** A change from its text; undefined for a kind this version does not know, or garbage. */
export function decodeChange(text: string): Change | undefined {
  const o = storedObject(text);
  if (!o) return undefined;
  if (o.k === "key" && typeof o.h === "string") return { kind: "key", hash: o.h };
  if (o.k === "override" && typeof o.c === "string") return { kind: "override", caller: o.c };
  if (o.k === "reset" && Array.isArray(o.ks) && o.ks.every((k) => typeof k === "string"))
    return { kind: "reset", keys: o.ks as string[] };
  return undefined;
}

/** The cursor when the stream did not exist at the last read. */
const NO_STREAM = "0-0";

/** Compares two stream ids (`ms-seq`) numerically. */
export function compareStreamIds(a: string, b: string): number {
  const [am = "0", as = "0"] = a.split("-");
  const [bm = "0", bs = "0"] = b.split("-");
  const ms = BigInt(am) - BigInt(bm);
  if (ms !== 0n) return ms < 0n ? -1 : 1;
  const seq = BigInt(as) - BigInt(bs);
  return seq === 0n ? 0 : seq < 0n ? -1 : 1;
}

/** Listeners of one feed; a throwing listener neither stops the others nor the feed. */
class Listeners {
  private readonly change: ((change: Change) => void)[] = [];
  private readonly reset: (() => void)[] = [];

  constructor(private readonly onError: (err: Error) => void) {}

  onChange(listener: (change: Change) => void): void {
    this.change.push(listener);
  }

  onReset(listener: () => void): void {
    this.reset.push(listener);
  }

  emitChange(change: Change): void {
    for (const l of this.change) this.guard(() => l(change));
  }

  emitReset(): void {
    for (const l of this.reset) this.guard(l);
  }

  private guard(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.onError(err instanceof Error ? err : new Error(String(err)));
    }
  }
}

/** The feed of a `memory://` store: this process only, delivered before publish resolves. */
export class MemoryChangeFeed implements ChangeFeed {
  private readonly listeners: Listeners;

  constructor(options: { onError?: (err: Error) => void } = {}) {
    this.listeners = new Listeners(options.onError ?? (() => {}));
  }

  publish(change: Change): Promise<void> {
    this.listeners.emitChange(change);
    return Promise.resolve();
  }

  onChange(listener: (change: Change) => void): void {
    this.listeners.onChange(listener);
  }

  onReset(listener: () => void): void {
    this.listeners.onReset(listener);
  }

  start(): void {}

  stop(): Promise<void> {
    return Promise.resolve();
  }
}

/** A repeating timer, injectable so tests drive the reconcile by hand. */
export type Every = (ms: number, fn: () => void) => { cancel(): void };

const realEvery: Every = (ms, fn) => {
  const t = setInterval(fn, ms);
  t.unref();
  return { cancel: () => clearInterval(t) };
};

/** A command for MULTI: the write a change describes, sent with its stream entry. */
export type WriteCommand = [string, ...(string | number)[]];

export interface RedisChangeFeedOptions {
  /** The store's connection; the subscriber is a duplicate of it. */
  client: Redis | Cluster;
  /** store.prefix (restart-only, so fixed for the feed's life). */
  prefix: string;
  /** Reconcile failures, a listener's exception, a subscriber error: logged by the gateway. */
  onError?: (err: Error) => void;
  /** Default RECONCILE_INTERVAL_MS. */
  reconcileIntervalMs?: number;
  every?: Every;
  /** Extra options for the subscriber connection, for tests (e.g. no reconnect). */
  subscriberOptions?: Record<string, unknown>;
  /** How a change was delivered here: for a metric, and for tests to tell the paths apart. */
  onDelivered?: (via: "local" | "pubsub" | "reconcile") => void;
}

export class RedisChangeFeed implements ChangeFeed {
  private readonly client: Redis | Cluster;
  private readonly stream: string;
  private readonly epochKey: string;
  private readonly channel: string;
  private readonly listeners: Listeners;
  private readonly onError: (err: Error) => void;
  private readonly every: Every;
  private readonly intervalMs: number;
  private readonly subscriberOptions: Record<string, unknown>;
  private readonly onDelivered: (via: "local" | "pubsub" | "reconcile") => void;
  private subscriber: Redis | Cluster | undefined;
  private timer: { cancel(): void } | undefined;
  /** The last stream entry read by the reconcile; undefined until the first one ran. */
  private cursor: string | undefined;
  /** The epoch the last reconcile saw; undefined until one read it. */
  private epoch: string | undefined;
  /** A reconcile failed before any read the epoch: lookups may have cached keys meanwhile. */
  private failedBeforeEpoch = false;
  /** Ids delivered ahead of the reconcile (pub/sub, or published here), oldest first. */
  private readonly delivered = new Set<string>();
  private reconciling: Promise<void> | undefined;
  private stopped = false;

  constructor(options: RedisChangeFeedOptions) {
    this.client = options.client;
    this.stream = changeStreamKey(options.prefix);
    this.epochKey = epochKey(options.prefix);
    this.channel = changeChannel(options.prefix);
    this.onError = options.onError ?? (() => {});
    this.listeners = new Listeners(this.onError);
    this.every = options.every ?? realEvery;
    this.intervalMs = options.reconcileIntervalMs ?? RECONCILE_INTERVAL_MS;
    this.subscriberOptions = options.subscriberOptions ?? {};
    this.onDelivered = options.onDelivered ?? (() => {});
  }

  onChange(listener: (change: Change) => void): void {
    this.listeners.onChange(listener);
  }

  onReset(listener: () => void): void {
    this.listeners.onReset(listener);
  }

  async publish(change: Change): Promise<void> {
    await this.publishWith(change, []);
  }

  /**
   * Runs `writes` and the change's XADD in one MULTI (every key under `{rt}`, so one slot in a
   * Cluster), then delivers it here and publishes it. A write and its record cannot part: if
   * the MULTI fails, neither happened; if only the PUBLISH fails, the reconcile delivers it.
   * Resolves with the replies of `writes`.
   */
  async publishWith(change: Change, writes: readonly WriteCommand[]): Promise<unknown[]> {
    const text = encodeChange(change);
    const multi = this.client.multi(writes.map((w) => [...w]));
    multi.xadd(this.stream, "MAXLEN", "~", CHANGE_STREAM_MAX, "*", "c", text);
    const replies = await multi.exec();
    if (replies === null) throw new Error("the change was not written: the transaction was aborted");
    for (const [err] of replies) if (err) throw err;
    const id = String(replies[replies.length - 1]![1]);
    this.remember(id);
    this.listeners.emitChange(change);
    this.onDelivered("local");
    // The write is done and recorded; a lost PUBLISH only makes other instances wait for their
    // reconcile, so its failure is reported, not thrown.
    await this.client.publish(this.channel, `${id} ${text}`).catch((err: unknown) => this.report(err));
    return replies.slice(0, -1).map(([, reply]) => reply);
  }

  start(): void {
    if (this.subscriber || this.stopped) return;
    // A duplicate keeps the store's address, credentials and TLS; pub/sub needs its own
    // connection. The offline queue is on here (the store's is off) so the SUBSCRIBE waits for
    // the connection instead of failing.
    const sub =
      this.client instanceof Cluster
        ? this.client.duplicate([], {
            enableOfflineQueue: true,
            redisOptions: { enableOfflineQueue: true, ...this.subscriberOptions },
          })
        : this.client.duplicate({
            enableOfflineQueue: true,
            maxRetriesPerRequest: null,
            // We subscribe on every "ready" ourselves, with a handler: ioredis' own resubscribe
            // drops its promise, so a SUBSCRIBE that timed out (Redis hung right after the
            // reconnect) or was flushed (stop) would be an unhandled rejection.
            autoResubscribe: false,
            ...this.subscriberOptions,
          });
    this.subscriber = sub;
    sub.on("error", (err: Error) => this.report(err));
    sub.on("message", (channel: string, message: string) => {
      if (channel === this.channel) this.heard(message);
    });
    const subscribe = () => {
      sub.subscribe(this.channel).catch((err: unknown) => this.report(err));
    };
    // A duplicate Cluster's subscriber node is chosen and resubscribed by ioredis, which
    // handles that SUBSCRIBE itself.
    if (sub instanceof Cluster) subscribe();
    else sub.on("ready", subscribe);
    // reconcile() never rejects (it reports), but a timer's callback must not leave a promise
    // that could: hence the catch.
    this.timer = this.every(this.intervalMs, () => {
      this.reconcile().catch((err: unknown) => this.report(err));
    });
    this.reconcile().catch((err: unknown) => this.report(err));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.timer = undefined;
    const sub = this.subscriber;
    this.subscriber = undefined;
    if (sub) sub.disconnect();
    await this.reconciling?.catch(() => {});
  }

  /** A pub/sub message: `<stream id> <change>`. */
  private heard(message: string): void {
    const space = message.indexOf(" ");
    if (space <= 0) return;
    const id = message.slice(0, space);
    if (this.delivered.has(id)) return;
    // Already passed by the reconcile: it was delivered then.
    if (this.cursor !== undefined && compareStreamIds(id, this.cursor) <= 0) return;
    const change = decodeChange(message.slice(space + 1));
    if (!change) return;
    this.remember(id);
    this.listeners.emitChange(change);
    this.onDelivered("pubsub");
  }

  private remember(id: string): void {
    if (this.delivered.size >= DELIVERED_MAX) {
      const oldest = this.delivered.values().next().value;
      if (oldest !== undefined) this.delivered.delete(oldest);
    }
    this.delivered.add(id);
  }

  /** One reconcile at a time; resolves when it is done (tests await it). */
  reconcile(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.reconciling) {
      this.reconciling = this.readStream()
        .catch((err: unknown) => {
          if (this.epoch === undefined) this.failedBeforeEpoch = true;
          this.report(err);
        })
        .finally(() => {
          this.reconciling = undefined;
        });
    }
    return this.reconciling;
  }

  private async readStream(): Promise<void> {
    const epoch = await this.readEpoch();
    if (this.epoch === undefined || this.cursor === undefined) {
      // First run: start at the stream's end; what came before was no cache's business. Unless
      // an earlier try failed: keys looked up since may be from before a restart we cannot see.
      this.cursor = await this.tail();
      this.epoch = epoch;
      if (this.failedBeforeEpoch) {
        this.failedBeforeEpoch = false;
        this.reset();
      }
      return;
    }
    if (epoch !== this.epoch) {
      // Redis lost its data since the last reconcile (the epoch is gone, so this one is new).
      this.cursor = await this.tail();
      this.epoch = epoch;
      this.reset();
      return;
    }
    let from = this.cursor === NO_STREAM ? "-" : this.cursor;
    for (;;) {
      const entries = (await this.client.xrange(this.stream, from, "+", "COUNT", RECONCILE_PAGE)) as [
        string,
        string[],
      ][];
      if (from === this.cursor || from === "-") {
        if (await this.missed(entries)) {
          this.cursor = await this.tail();
          this.reset();
          return;
        }
      }
      for (const [id, fields] of entries) {
        if (id === this.cursor) continue;
        this.cursor = id;
        if (this.delivered.delete(id)) continue;
        const text = fieldOf(fields, "c");
        const change = text === undefined ? undefined : decodeChange(text);
        if (!change) continue;
        this.listeners.emitChange(change);
        this.onDelivered("reconcile");
      }
      // Heard-ahead ids the cursor has passed will never be read again.
      if (this.cursor !== NO_STREAM)
        for (const id of this.delivered)
          if (compareStreamIds(id, this.cursor) <= 0) this.delivered.delete(id);
      if (entries.length < RECONCILE_PAGE) return;
      from = this.cursor;
    }
  }

  /**
   * Whether changes may have been lost before the first page `entries` of this reconcile. With
   * a cursor: its entry is gone (trimmed past us, or the stream vanished with a restart). With
   * no stream at the last read: one heard since is not in the stream any more (Redis restarted
   * empty after it), or the stream has been trimmed already (it only is past
   * CHANGE_STREAM_MAX entries, so a shorter one holds every change since it was created).
   */
  private async missed(entries: readonly [string, string[]][]): Promise<boolean> {
    if (this.cursor !== NO_STREAM) return entries[0]?.[0] !== this.cursor;
    const first = entries[0]?.[0];
    for (const id of this.delivered) if (first === undefined || compareStreamIds(id, first) < 0) return true;
    return first !== undefined && (await this.client.xlen(this.stream)) >= CHANGE_STREAM_MAX;
  }

  private reset(): void {
    this.delivered.clear();
    this.listeners.emitReset();
  }

  /** The epoch in Redis, created if missing: one command (a script, so one round trip). */
  private async readEpoch(): Promise<string> {
    return String(await this.client.eval(EPOCH_SCRIPT, 1, this.epochKey, randomUUID(), EPOCH_TTL_MS));
  }

  /**
   * The id of the stream's last entry, or NO_STREAM. Nothing is written: a gateway whose
   * operators never change anything at runtime leaves one key in Redis, the epoch (EPOCH_TTL_MS).
   */
  private async tail(): Promise<string> {
    const last = (await this.client.xrevrange(this.stream, "+", "-", "COUNT", 1)) as [string, string[]][];
    return last[0]?.[0] ?? NO_STREAM;
  }

  private report(err: unknown): void {
    if (this.stopped) return;
    this.onError(err instanceof Error ? err : new Error(String(err)));
  }
}

function fieldOf(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

/** The feed for a store: in-process for `memory://`, the stream and channel for Redis. */
export type ChangeFeedStore = { kind: "memory" } | { kind: "redis"; client: Redis | Cluster; prefix: string };

export function createChangeFeed(
  store: ChangeFeedStore,
  options: Omit<RedisChangeFeedOptions, "client" | "prefix"> = {},
): MemoryChangeFeed | RedisChangeFeed {
  return store.kind === "memory"
    ? new MemoryChangeFeed({ onError: options.onError })
    : new RedisChangeFeed({ client: store.client, prefix: store.prefix, ...options });
}
