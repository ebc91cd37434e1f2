// The shared store: every decision is one EVALSHA of check.lua, so all gateway instances that
// point at the same Redis enforce one limit together.
//
// ioredis is set to fail fast: no offline queue and no per-request retries, so a dead Redis turns
// into an immediate rejection that the failure policy answers, never a request parked in a queue.
// Reconnection happens in the background with a capped backoff.
import { Redis, type RedisOptions } from "ioredis";
import { withDeadline } from "../../deadline.js";
import { ALGORITHMS, scriptCostArg } from "../algorithms.js";
import type { LimitCheck, LimitOutcome, StoreDecision } from "../spec.js";
import {
  type ChargedLimit,
  DENIAL_LOG_MAX,
  DENIAL_LOG_TTL_MS,
  type Denial,
  type DenialBatch,
  type DenialRecord,
  decodeDenial,
  encodeDenial,
  type Lease,
  type Store,
  TOP_BUCKET_TTL_MS,
} from "../store.js";
import { CHARGE_SCRIPT, CHECK_SCRIPT, PEEK_SCRIPT } from "./scripts.js";

export interface RedisStoreOptions {
  url: string;
  /** Upper bound on one check, in ms (SPEC `store.timeout`). */
  timeoutMs: number;
  /** Called for connection-level errors (logged by the server, rate-limited there). */
  onError?: (err: Error) => void;
  /** Extra ioredis options, for tests. */
  redisOptions?: Partial<RedisOptions>;
}

/** The narrow slice of the client this store uses: the defined script command. */
interface BatchItem {
  checks: readonly LimitCheck[];
  nowMs: number | undefined;
  record: DenialRecord | undefined;
  resolve: (decision: StoreDecision) => void;
  reject: (err: Error) => void;
}

interface Batch {
  items: BatchItem[];
  keys: number;
  settled: boolean;
  timer: NodeJS.Timeout;
}

/** Bounds one EVALSHA: Redis parses arguments in one go and the script runs without yielding. */
export const MAX_BATCH_REQUESTS = 128;
export const MAX_BATCH_KEYS = 512;

type CheckCommand = (numKeys: number, ...args: (string | number)[]) => Promise<unknown>;

/**
 * Reconnect attempts back off from 50 ms to this cap. Low, because the time Redis is back but
 * tollgate is not yet connected is time every check is degraded; one connect attempt per
 * half-second against a dead Redis costs nothing.
 */
export const MAX_RECONNECT_DELAY_MS = 500;

export class RedisStore implements Store {
  readonly kind = "redis";
  readonly client: Redis;
  private readonly runCheck: CheckCommand;
  private readonly runCharge: CheckCommand;
  private readonly runPeek: CheckCommand;
  private readonly timeoutMs: number;
  private open: Batch | null = null;

  constructor(options: RedisStoreOptions) {
    this.timeoutMs = options.timeoutMs;
    this.client = new Redis(options.url, {
      enableAutoPipelining: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.timeoutMs,
      connectTimeout: Math.max(1000, options.timeoutMs * 10),
      // Reconnect forever, quickly at first, never slower than every MAX_RECONNECT_DELAY_MS.
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), MAX_RECONNECT_DELAY_MS),
      ...options.redisOptions,
    });
    this.client.on("error", (err: Error) => options.onError?.(err));
    // defineCommand runs EVALSHA and falls back to EVAL on NOSCRIPT (a restarted or failed-over
    // Redis has an empty script cache), so the script is loaded once per server, not per call.
    this.client.defineCommand("tollgateCheck", { lua: CHECK_SCRIPT });
    this.runCheck = (this.client as unknown as { tollgateCheck: CheckCommand }).tollgateCheck.bind(
      this.client,
    );
    this.client.defineCommand("tollgatePeek", { lua: PEEK_SCRIPT });
    this.runPeek = (this.client as unknown as { tollgatePeek: CheckCommand }).tollgatePeek.bind(this.client);
    this.client.defineCommand("tollgateCharge", { lua: CHARGE_SCRIPT });
    this.runCharge = (this.client as unknown as { tollgateCharge: CheckCommand }).tollgateCharge.bind(
      this.client,
    );
  }

  /**
   * Checks are coalesced: every check asked during one turn of the event loop goes to Redis as
   * one EVALSHA (up to MAX_BATCH), decided in arrival order, each request atomic on its own.
   * That amortises the per-command cost of the client and of Redis over the batch; a check
   * waits at most for the current turn to end.
   */
  check(checks: readonly LimitCheck[], nowMs?: number, record?: DenialRecord): Promise<StoreDecision> {
    if (checks.length === 0) return Promise.resolve({ allowed: true, outcomes: [] });
    return new Promise<StoreDecision>((resolve, reject) => {
      let batch = this.open;
      if (!batch) {
        batch = this.open = this.newBatch();
        setImmediate(this.flushOpen);
      }
      batch.items.push({ checks, nowMs, record, resolve, reject });
      batch.keys += checks.length + (record ? 2 : 0);
      if (batch.items.length >= MAX_BATCH_REQUESTS || batch.keys >= MAX_BATCH_KEYS) this.flush(batch);
    });
  }

  private readonly flushOpen = () => {
    if (this.open) this.flush(this.open);
  };

  private newBatch(): Batch {
    const batch: Batch = {
      items: [],
      keys: 0,
      settled: false,
      timer: undefined as unknown as NodeJS.Timeout,
    };
    // ioredis starts commandTimeout only when a command is written, and auto-pipelining holds a
    // slot's next batch until the running one settles: behind a hung Redis a check would wait
    // up to twice the timeout. The deadline therefore starts when the first request asks.
    batch.timer = setTimeout(() => this.settle(batch, new StoreTimeoutError(this.timeoutMs)), this.timeoutMs);
    return batch;
  }

  private flush(batch: Batch): void {
    if (this.open === batch) this.open = null;
    const args: (string | number)[] = [];
    for (const item of batch.items) {
      for (const c of item.checks) args.push(c.key);
      if (item.record) args.push(item.record.logKey, item.record.topKey);
    }
    args.push(batch.items.length);
    for (const item of batch.items) {
      args.push(item.nowMs === undefined ? "" : item.nowMs, item.checks.length, item.record?.text ?? "");
      pushLimitArgs(args, item.checks, true);
    }
    this.runCheck(batch.keys, ...args).then(
      (reply) => {
        if (batch.settled) return;
        let decisions: StoreDecision[];
        try {
          decisions = parseCheckReply(
            reply,
            batch.items.map((i) => i.checks.length),
          );
        } catch (err) {
          this.settle(batch, err as Error);
          return;
        }
        batch.settled = true;
        clearTimeout(batch.timer);
        for (let i = 0; i < batch.items.length; i++) batch.items[i]!.resolve(decisions[i]!);
      },
      (err: unknown) => this.settle(batch, err instanceof Error ? err : new Error(String(err))),
    );
  }

  /** Fails every request of a batch once (a late reply after a timeout is ignored). */
  private settle(batch: Batch, err: Error): void {
    if (batch.settled) return;
    batch.settled = true;
    clearTimeout(batch.timer);
    if (this.open === batch) this.open = null;
    for (const item of batch.items) item.reject(err);
  }

  /** Post-charges are rare (one per response carrying Tollgate-Cost): not coalesced. */
  charge(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]> {
    const args: (string | number)[] = checks.map((c) => c.key);
    args.push(nowMs === undefined ? "" : nowMs);
    pushLimitArgs(args, checks);
    return withDeadline(
      this.runCharge(checks.length, ...args),
      this.timeoutMs,
      () => new StoreTimeoutError(this.timeoutMs),
    ).then((reply) => parseChargeReply(reply, checks.length));
  }

  /**
   * One ZREM per lease. A request's leases may sit under different hash tags (a `by: ip` route
   * limit beside a client's), so they are not one multi-key script; auto-pipelining still sends
   * them together.
   */
  release(leases: readonly Lease[]): Promise<void> {
    return withDeadline(
      Promise.all(leases.map((l) => this.client.zrem(l.key, l.leaseId))),
      this.timeoutMs,
      () => new StoreTimeoutError(this.timeoutMs),
    ).then(() => undefined);
  }

  peek(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]> {
    const args: (string | number)[] = checks.map((c) => c.key);
    args.push(nowMs === undefined ? "" : nowMs);
    for (const c of checks) {
      const algorithm = ALGORITHMS[c.spec.algorithm];
      args.push(algorithm.code, ...algorithm.scriptParams(c.spec));
    }
    return this.bounded(this.runPeek(checks.length, ...args)).then((reply) =>
      parseChargeReply(reply, checks.length),
    );
  }

  async denials(logKey: string): Promise<Denial[]> {
    const entries = await this.bounded(this.client.lrange(logKey, 0, -1));
    return entries.map(decodeDenial);
  }

  /** A few commands per caller, whatever its number of denials; auto-pipelined together. */
  recordDenials(batch: readonly DenialBatch[]): Promise<void> {
    const writes: Promise<unknown>[] = [];
    for (const b of batch) {
      const entries = b.entries.slice(-DENIAL_LOG_MAX).map(encodeDenial);
      writes.push(
        this.client.lpush(b.logKey, ...entries),
        this.client.ltrim(b.logKey, 0, DENIAL_LOG_MAX - 1),
        this.client.pexpire(b.logKey, DENIAL_LOG_TTL_MS),
        this.client.zincrby(b.topKey, b.count ?? b.entries.length, b.caller),
        this.client.pexpire(b.topKey, TOP_BUCKET_TTL_MS),
      );
    }
    return this.bounded(Promise.all(writes)).then(() => undefined);
  }

  async topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]> {
    if (topKeys.length === 0) return [];
    const flat = await this.bounded(
      this.client.call("ZUNION", topKeys.length, ...topKeys, "WITHSCORES") as Promise<string[]>,
    );
    const out: { caller: string; count: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ caller: flat[i]!, count: Number(flat[i + 1]) });
    return out.sort((a, b) => b.count - a.count || (a.caller < b.caller ? -1 : 1)).slice(0, n);
  }

  reset(keys: readonly string[]): Promise<number> {
    if (keys.length === 0) return Promise.resolve(0);
    return this.bounded(this.client.del(...keys));
  }

  /** Every call other than a check is bounded by the same timeout. */
  private bounded<T>(work: Promise<T>): Promise<T> {
    return withDeadline(work, this.timeoutMs, () => new StoreTimeoutError(this.timeoutMs));
  }

  async ping(): Promise<void> {
    await this.client.ping();
  }

  isConnected(): boolean {
    return this.client.status === "ready";
  }

  /**
   * Resolves true once connected, or false after `timeoutMs`. Start-up waits on it briefly so
   * the first requests are not degraded by a connection still being set up; it never blocks on
   * a Redis that is down.
   */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    if (this.isConnected()) return true;
    return new Promise((resolve) => {
      const done = (ready: boolean) => {
        clearTimeout(timer);
        this.client.off("ready", onReady);
        resolve(ready);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.client.once("ready", onReady);
    });
  }

  async close(): Promise<void> {
    this.client.disconnect();
  }
}

/**
 * Per limit, the four script arguments both scripts take: algorithm code, param 1, param 2, and
 * the cost (the lease id for a concurrency limit).
 */
function pushLimitArgs(args: (string | number)[], checks: readonly LimitCheck[], markShadow = false): void {
  for (const c of checks) {
    const algorithm = ALGORITHMS[c.spec.algorithm];
    const [p1, p2] = algorithm.scriptParams(c.spec);
    const code = markShadow && c.spec.shadow ? algorithm.code + SHADOW_FLAG : algorithm.code;
    args.push(code, p1, p2, scriptCostArg(c));
  }
}

/** Added to an algorithm code in check.lua's arguments: this limit is a shadow limit. */
const SHADOW_FLAG = 16;

export class StoreTimeoutError extends Error {
  constructor(ms: number) {
    super(`the limit store did not answer within ${ms} ms`);
    this.name = "StoreTimeoutError";
  }
}

export class StoreReplyError extends Error {
  constructor(message: string) {
    super(`unexpected reply from the limit script: ${message}`);
    this.name = "StoreReplyError";
  }
}

/** charge.lua's reply: per limit, remaining and reset_ms after the debit. */
export function parseChargeReply(reply: unknown, limits: number): ChargedLimit[] {
  if (!Array.isArray(reply) || reply.length !== limits * 2 || reply.some((v) => typeof v !== "number")) {
    throw new StoreReplyError(`expected ${limits * 2} integers from charge.lua`);
  }
  const values = reply as number[];
  const charged: ChargedLimit[] = [];
  for (let i = 0; i < limits; i++) charged.push({ remaining: values[2 * i]!, resetMs: values[2 * i + 1]! });
  return charged;
}

/**
 * Shape-checks the script's reply rather than trusting a cast: a wrong reply must not allow.
 * `limitsPerRequest` gives how many limits each request of the batch had.
 */
export function parseCheckReply(reply: unknown, limitsPerRequest: readonly number[]): StoreDecision[] {
  const expected = limitsPerRequest.reduce((n, limits) => n + 1 + limits * 4, 0);
  if (!Array.isArray(reply) || reply.length !== expected) {
    throw new StoreReplyError(`expected an array of ${expected} integers`);
  }
  for (const v of reply) if (typeof v !== "number") throw new StoreReplyError("expected integers");
  const values = reply as number[];
  const decisions: StoreDecision[] = [];
  let at = 0;
  for (const limits of limitsPerRequest) {
    const allowed = values[at++] === 1;
    const outcomes: LimitOutcome[] = [];
    for (let i = 0; i < limits; i++, at += 4) {
      const limitAllowed = values[at] === 1;
      // The fourth field is the wait for a slot when allowed (leaky bucket), else retry-after.
      const wait = values[at + 3]!;
      const outcome: LimitOutcome = {
        allowed: limitAllowed,
        remaining: values[at + 1]!,
        resetMs: values[at + 2]!,
        retryAfterMs: limitAllowed ? 0 : wait,
      };
      if (limitAllowed && wait > 0) outcome.delayMs = wait;
      outcomes.push(outcome);
    }
    decisions.push({ allowed, outcomes });
  }
  return decisions;
}
