// The shared store: every decision is one EVALSHA of check.lua, so all gateway instances that
// point at the same Redis enforce one limit together.
//
// ioredis is set to fail fast: no offline queue and no per-request retries, so a dead Redis turns
// into an immediate rejection that the failure policy answers, never a request parked in a queue.
// Reconnection happens in the background with a capped backoff.
import calculateSlot from "cluster-key-slot";
import { Cluster, Redis, type RedisOptions } from "ioredis";
import { atDeadline, type DeadlineTimer, withDeadline, withDeadlineAt } from "../../deadline.js";
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
import { localNow, RedisClock } from "./redis-clock.js";
import { CHARGE_SCRIPT, CHECK_SCRIPT, PEEK_SCRIPT, REFUND_SCRIPT, RENEW_SCRIPT } from "./scripts.js";

export interface RedisStoreOptions {
  /** A single Redis (redis:// or rediss://). Exactly one of url, cluster and sentinel. */
  url?: string;
  /** Redis Cluster seed nodes (redis://host:port). */
  cluster?: readonly string[];
  /** Redis Sentinel: the master's name and sentinel nodes (host:port). */
  sentinel?: { name: string; nodes: readonly string[] };
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
  /** Part of a request spread over several slots: its decision's time is kept for a give-back. */
  crossSlot: boolean;
  resolve: (decision: StoreDecision) => void;
  reject: (err: Error) => void;
}

interface Batch {
  slot: number;
  items: BatchItem[];
  keys: number;
  settled: boolean;
  /** Written to Redis, and then answered (or given up on). */
  sent: boolean;
  landed: boolean;
  /** When the gateway gives up on the batch, on the local monotonic clock (localNow). */
  deadline: number;
  /** Armed when the batch is written. */
  timer: DeadlineTimer | undefined;
}

/** What a check took, for a give-back: its request's checks, the decision, and when it was decided. */
interface Taken {
  checks: readonly LimitCheck[];
  decision: StoreDecision;
  /** The time check.lua decided at, exactly as it used it (its clock's "%.17g", or a test's now). */
  at: string | number;
}

/** Clocks kept per shard; a cluster has a handful of masters, renamed ones are forgotten. */
const MAX_CLOCKS = 64;

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
  readonly client: Redis | Cluster;
  /** In a Redis Cluster a script's keys must share a slot: batches and groups are per slot. */
  readonly clustered: boolean;
  private readonly runCheck: CheckCommand;
  private readonly runCharge: CheckCommand;
  private readonly runPeek: CheckCommand;
  private readonly runRenew: CheckCommand;
  private readonly runRefund: CheckCommand;
  private readonly timeoutMs: number;
  /** Redis's clock per shard (a cluster's masters may disagree), learnt from script replies. */
  private readonly clocks = new Map<string, RedisClock>();
  /** When each part of a cross-slot request was decided, for a give-back if a later part fails. */
  private readonly decidedAt = new WeakMap<StoreDecision, string | number>();
  private readonly open = new Map<number, Batch>();
  /** Batches sent and not yet answered, per slot. */
  private readonly inFlight = new Map<number, number>();
  private topCounts = new Map<string, Map<string, number>>();
  private topTimer: NodeJS.Timeout | undefined;

  constructor(options: RedisStoreOptions) {
    this.timeoutMs = options.timeoutMs;
    const redisOptions: RedisOptions = {
      enableAutoPipelining: true,
      // Checks are coalesced by the store itself (one batch per slot in flight); wrapping each
      // batch in an auto-pipeline of one command only adds work.
      autoPipeliningIgnoredCommands: ["tollgateCheck"],
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // The store's own deadlines decide (they are judged after the replies already read, see
      // deadline.ts); ioredis' timer, which fires before them, only reclaims commands a hung
      // Redis never answers.
      commandTimeout: Math.max(1000, 3 * options.timeoutMs),
      connectTimeout: Math.max(1000, options.timeoutMs * 10),
      // Reconnect forever, quickly at first, never slower than every MAX_RECONNECT_DELAY_MS.
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), MAX_RECONNECT_DELAY_MS),
      ...options.redisOptions,
    };
    this.clustered = options.cluster !== undefined;
    if (options.cluster) {
      const seeds = options.cluster.map((u) => {
        const url = new URL(u);
        return { host: url.hostname, port: Number(url.port || 6379) };
      });
      const first = new URL(options.cluster[0]!);
      this.client = new Cluster(seeds, {
        // ioredis groups auto-pipelined scripts by their first argument (the key count), not
        // their first key, and then refuses the mixed-slot pipeline (redis/ioredis#2109). The
        // store batches checks per slot itself, so nothing is lost by turning it off.
        enableAutoPipelining: false,
        enableOfflineQueue: false,
        // MOVED and ASK are followed by ioredis; the store's deadline bounds the whole check.
        // While a slot migrates, a check naming a key already moved and one not yet created
        // (the denial log) gets TRYAGAIN, which ioredis retries every 100 ms (its default).
        retryDelayOnFailover: 50,
        retryDelayOnClusterDown: 50,
        clusterRetryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), MAX_RECONNECT_DELAY_MS),
        redisOptions: {
          ...redisOptions,
          enableAutoPipelining: false,
          password: first.password ? decodeURIComponent(first.password) : undefined,
          username: first.username ? decodeURIComponent(first.username) : undefined,
          tls: first.protocol === "rediss:" ? {} : undefined,
        },
      });
    } else if (options.sentinel) {
      this.client = new Redis({
        ...redisOptions,
        name: options.sentinel.name,
        sentinels: options.sentinel.nodes.map((node) => {
          const [host, port] = node.replace(/^redis:\/\//, "").split(":");
          return { host: host!, port: Number(port ?? 26379) };
        }),
      });
    } else {
      this.client = new Redis(options.url ?? "redis://127.0.0.1:6379", redisOptions);
    }
    this.client.on("error", (err: Error) => options.onError?.(err));
    if (this.clustered) {
      // ioredis creates a cluster's node connections lazily and queues commands on them until
      // they are ready (whatever enableOfflineQueue says for the cluster). The first checks
      // for each master then waited for a TCP connect and a ready check, each a turn of an
      // event loop that a burst of requests keeps busy: 400–900 ms measured under load, past
      // the store timeout, which counted against that master's breaker. Connecting each node
      // as soon as the slot map names it moves that wait out of the requests' way.
      this.client.on("+node", (node: Redis) => {
        if (node.status === "wait") node.connect().catch(() => {});
      });
    }
    // defineCommand runs EVALSHA and falls back to EVAL on NOSCRIPT (a restarted or failed-over
    // Redis, or a cluster node that never ran it, has an empty script cache), so each script is
    // loaded once per server, not per call. In a cluster ioredis sends it to the node owning
    // the first key and follows MOVED/ASK.
    const define = (name: string, lua: string): CheckCommand => {
      this.client.defineCommand(name, { lua });
      return (this.client as unknown as Record<string, CheckCommand>)[name]!.bind(this.client);
    };
    this.runCheck = define("tollgateCheck", CHECK_SCRIPT);
    this.runPeek = define("tollgatePeek", PEEK_SCRIPT);
    this.runCharge = define("tollgateCharge", CHARGE_SCRIPT);
    this.runRenew = define("tollgateRenew", RENEW_SCRIPT);
    this.runRefund = define("tollgateRefund", REFUND_SCRIPT);
  }

  /** The master serving a slot, in a cluster ("" before the slot map is known, and on a single Redis). */
  private shardOfSlot(slot: number): string {
    return this.clustered ? ((this.client as Cluster).slots[slot]?.[0] ?? "") : "";
  }

  private clockOf(shard: string): RedisClock {
    let clock = this.clocks.get(shard);
    if (!clock) {
      if (this.clocks.size >= MAX_CLOCKS) this.clocks.clear();
      clock = new RedisClock();
      this.clocks.set(shard, clock);
    }
    return clock;
  }

  /** The indexes of `checks` by the slot of their key, in order of first appearance. */
  private groupBySlot(checks: readonly LimitCheck[]): Map<number, number[]> {
    const groups = new Map<number, number[]>();
    checks.forEach((c, i) => {
      const slot = this.slotOf(c.key);
      const group = groups.get(slot);
      if (group) group.push(i);
      else groups.set(slot, [i]);
    });
    return groups;
  }

  /** The master serving the slot of the first key, in a cluster; "" for a single Redis. */
  shardOf(checks: readonly LimitCheck[]): string {
    if (!this.clustered || checks.length === 0) return "";
    // Before the slot map is known every check shares one state, as on a single Redis.
    return (this.client as Cluster).slots[this.slotOf(checks[0]!.key)]?.[0] ?? "";
  }

  /** The slot of a key (0 for a single Redis: everything batches together). */
  private slotOf(key: string): number {
    return this.clustered ? calculateSlot(key) : 0;
  }

  /**
   * Checks are coalesced: the checks asked while a slot has a batch in flight go to Redis as
   * one EVALSHA (up to MAX_BATCH) when its reply comes, decided in arrival order, each request
   * atomic on its own. With nothing in flight a check goes out at the end of the current turn
   * of the event loop. Batches so grow with the load, and the per-command cost of the client,
   * the socket and Redis is paid once per batch; a check waits at most one round trip more.
   */
  check(checks: readonly LimitCheck[], nowMs?: number, record?: DenialRecord): Promise<StoreDecision> {
    if (checks.length === 0) return Promise.resolve({ allowed: true, outcomes: [] });
    if (!this.clustered) return this.enqueue(0, checks, nowMs, record);
    const slot = this.slotOf(checks[0]!.key);
    const sameSlot = checks.every((c) => this.slotOf(c.key) === slot);
    // The top-denials bucket has its own hash tag: in a cluster it is counted after the fact.
    const logOnly = record ? { ...record, topKey: "" } : undefined;
    const decided = sameSlot
      ? this.enqueue(slot, checks, nowMs, logOnly)
      : this.checkAcrossSlots(checks, nowMs, logOnly);
    if (!record) return decided;
    return decided.then((decision) => {
      if (!decision.allowed)
        this.countTopDenial(record.topKey, record.text.slice(0, record.text.indexOf("\t")));
      return decision;
    });
  }

  /**
   * In a cluster, top-list counts are summed here and written once a second (and before the
   * top list is read): a burst of denials costs a few commands, not two per denial.
   */
  private countTopDenial(topKey: string, caller: string): void {
    let callers = this.topCounts.get(topKey);
    if (!callers) {
      callers = new Map();
      this.topCounts.set(topKey, callers);
    }
    callers.set(caller, (callers.get(caller) ?? 0) + 1);
    if (!this.topTimer) {
      this.topTimer = setTimeout(() => void this.flushTopCounts(), 1000);
      this.topTimer.unref();
    }
  }

  private async flushTopCounts(): Promise<void> {
    clearTimeout(this.topTimer);
    this.topTimer = undefined;
    if (this.topCounts.size === 0) return;
    const counts = this.topCounts;
    this.topCounts = new Map();
    const writes: Promise<unknown>[] = [];
    for (const [topKey, callers] of counts) {
      for (const [caller, n] of callers) writes.push(this.client.zincrby(topKey, n, caller));
      writes.push(this.client.pexpire(topKey, TOP_BUCKET_TTL_MS));
    }
    await this.bounded(Promise.all(writes)).catch(() => {});
  }

  /**
   * A request whose limits live under different hash tags (a `by: ip` route limit beside a
   * client's own limits) cannot be one script call in a cluster. Its limits are decided slot by
   * slot, the caller's own first; a later denial does not give back what an earlier slot took.
   * docs/scaling.md says so.
   */
  private async checkAcrossSlots(
    checks: readonly LimitCheck[],
    nowMs: number | undefined,
    record: DenialRecord | undefined,
  ): Promise<StoreDecision> {
    const groups = this.groupBySlot(checks);
    const outcomes: LimitOutcome[] = new Array(checks.length);
    const taken: Taken[] = [];
    for (const [slot, indexes] of groups) {
      const part = indexes.map((i) => checks[i]!);
      const sameTag = record && this.slotOf(record.logKey) === slot ? record : undefined;
      let decision: StoreDecision;
      try {
        decision = await this.enqueue(slot, part, nowMs, sameTag, true);
      } catch (err) {
        // The request is answered without the store's decision: what earlier slots took goes back.
        for (const t of taken) this.refund([t]);
        throw err;
      }
      const at = this.decidedAt.get(decision);
      if (at !== undefined) taken.push({ checks: part, decision, at });
      indexes.forEach((i, j) => {
        outcomes[i] = decision.outcomes[j]!;
      });
      if (!decision.allowed) {
        // Limits not reached yet report nothing taken: what a zero-cost look would see.
        for (let i = 0; i < checks.length; i++) {
          outcomes[i] ??= { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
        }
        return { allowed: false, outcomes };
      }
    }
    return { allowed: true, outcomes };
  }

  private enqueue(
    slot: number,
    checks: readonly LimitCheck[],
    nowMs: number | undefined,
    record: DenialRecord | undefined,
    crossSlot = false,
  ): Promise<StoreDecision> {
    return new Promise<StoreDecision>((resolve, reject) => {
      let batch = this.open.get(slot);
      if (!batch) {
        batch = this.newBatch(slot);
        this.open.set(slot, batch);
        // While a batch of this slot is in flight, the next one fills until its reply comes.
        if (!this.inFlight.has(slot)) this.scheduleFlush();
      }
      batch.items.push({ checks, nowMs, record, crossSlot, resolve, reject });
      batch.keys += checks.length + recordKeyCount(record);
      if (batch.items.length >= MAX_BATCH_REQUESTS || batch.keys >= MAX_BATCH_KEYS) this.flush(batch);
    });
  }

  private flushScheduled = false;

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.flushOpen);
  }

  /** Sends every open batch whose slot has nothing in flight. */
  private readonly flushOpen = () => {
    this.flushScheduled = false;
    for (const batch of this.open.values()) if (!this.inFlight.has(batch.slot)) this.flush(batch);
  };

  /**
   * A slot's batch was answered, failed or passed its deadline: the batch that filled meanwhile
   * goes out now. A batch past its deadline no longer holds the next one back, so a hung reply
   * never stalls its slot.
   */
  private land(batch: Batch): void {
    if (!batch.sent || batch.landed) return;
    batch.landed = true;
    const slot = batch.slot;
    const count = (this.inFlight.get(slot) ?? 1) - 1;
    if (count > 0) {
      this.inFlight.set(slot, count);
      return;
    }
    this.inFlight.delete(slot);
    const next = this.open.get(slot);
    if (next) this.flush(next);
  }

  private newBatch(slot: number): Batch {
    const batch: Batch = {
      slot,
      items: [],
      keys: 0,
      settled: false,
      sent: false,
      landed: false,
      // Set when the batch is written (flush).
      deadline: Number.POSITIVE_INFINITY,
      timer: undefined,
    };
    return batch;
  }

  /**
   * Gives up on a batch once the local clock has passed its deadline (never before it, see
   * atDeadline: a script told that deadline never decides after the gateway answered without it).
   */
  private armDeadline(batch: Batch): void {
    batch.timer = atDeadline(batch.deadline, localNow, () => {
      if (batch.settled) return;
      const err = new StoreTimeoutError(this.timeoutMs);
      this.settle(batch, err);
      // The batch that filled behind it is not sent: the store has just failed to answer
      // within the timeout, and its requests, all asked after this batch was written, have
      // waited part of it already. Answering them now keeps every check within the timeout.
      const queued = this.open.get(batch.slot);
      if (queued && !queued.sent) this.settle(queued, err);
      this.land(batch);
    });
  }

  private flush(batch: Batch): void {
    if (this.open.get(batch.slot) === batch) this.open.delete(batch.slot);
    // Timed out while it waited for the batch ahead of it: its requests are answered already.
    if (batch.settled) return;
    this.inFlight.set(batch.slot, (this.inFlight.get(batch.slot) ?? 0) + 1);
    batch.sent = true;
    // The deadline counts from the write, not from the first request's ask: the time a check
    // spends before its batch is written is this process's own (the rest of a busy event-loop
    // turn, or the reply ahead of it read late), and counting it made a loaded gateway declare
    // a healthy store timed out and open its breaker (issue 20.7). A batch waiting behind one
    // in flight is bounded by that one's deadline (see armDeadline).
    batch.deadline = localNow() + this.timeoutMs;
    this.armDeadline(batch);
    const land = () => this.land(batch);
    const args: (string | number)[] = [];
    for (const item of batch.items) {
      for (const c of item.checks) args.push(c.key);
      if (item.record) {
        args.push(item.record.logKey);
        if (item.record.topKey) args.push(item.record.topKey);
      }
    }
    // The deadline in Redis's clock: past it the script writes nothing and answers "expired", so
    // a check the gateway answered without the store consumes nothing when Redis runs it late.
    // Before the shard's clock is known (its first reply) there is none; a late reply is then
    // given back instead.
    const clock = this.clockOf(this.shardOfSlot(batch.slot));
    const deadline = clock.toRedis(batch.deadline);
    args.push(batch.items.length, deadline === undefined ? "" : deadline);
    for (const item of batch.items) {
      args.push(
        item.nowMs === undefined ? "" : item.nowMs,
        item.checks.length,
        recordKeyCount(item.record),
        item.record?.text ?? "",
      );
      pushLimitArgs(args, item.checks, true);
    }
    const sentAt = localNow();
    this.runCheck(batch.keys, ...args).then(
      (reply) => {
        const receivedAt = localNow();
        land();
        let header: ScriptHeader;
        let decisions: StoreDecision[];
        try {
          header = parseScriptHeader(reply);
          clock.sample(header.redisMs, sentAt, receivedAt);
          // Past its deadline: nothing was written. Late or not, the requests have no decision.
          if (header.expired) throw new StoreTimeoutError(this.timeoutMs);
          decisions = parseCheckReply(
            header.body,
            batch.items.map((i) => i.checks.length),
            batch.items.map((i) => i.checks.map((c) => c.batch !== undefined)),
          );
        } catch (err) {
          this.settle(batch, err as Error);
          return;
        }
        if (batch.settled) {
          // Decided after the gateway answered these requests without it: give back what it took.
          this.refund(
            batch.items.map((item, i) => ({
              checks: item.checks,
              decision: decisions[i]!,
              at: item.nowMs ?? header.clock,
            })),
          );
          return;
        }
        batch.settled = true;
        batch.timer?.clear();
        for (let i = 0; i < batch.items.length; i++) {
          const item = batch.items[i]!;
          if (item.crossSlot) this.decidedAt.set(decisions[i]!, item.nowMs ?? header.clock);
          item.resolve(decisions[i]!);
        }
      },
      (err: unknown) => {
        land();
        this.settle(batch, err instanceof Error ? err : new Error(String(err)));
      },
    );
  }

  /** Fails every request of a batch once (a late reply after a timeout is ignored). */
  private settle(batch: Batch, err: Error): void {
    if (batch.settled) return;
    batch.settled = true;
    batch.timer?.clear();
    if (this.open.get(batch.slot) === batch) this.open.delete(batch.slot);
    for (const item of batch.items) item.reject(err);
  }

  /**
   * Gives back, best effort, what allowed requests took (their units, their leases) when the
   * gateway answered them without the store's decision. One script call: the checks of `taken`
   * share a slot. A give-back that fails leaves the units to their window and the leases to
   * their expiry, as before.
   */
  private refund(taken: readonly Taken[]): void {
    const keys: string[] = [];
    const args: (string | number)[] = [];
    for (const t of taken) {
      if (!t.decision.allowed) continue;
      t.checks.forEach((c, i) => {
        const outcome = t.decision.outcomes[i];
        // A shadow limit that would have denied took nothing.
        if (!outcome?.allowed) return;
        let units: string | number;
        if (c.spec.algorithm === "concurrency") {
          if (c.leaseId === undefined) return;
          units = c.leaseId;
        } else {
          units = c.batch === undefined ? c.cost : (outcome.taken ?? c.cost);
          if (!(units > 0)) return;
        }
        const algorithm = ALGORITHMS[c.spec.algorithm];
        const [p1, p2] = algorithm.scriptParams(c.spec);
        keys.push(c.key);
        args.push(t.at, algorithm.code, p1, p2, units);
      });
    }
    if (keys.length === 0) return;
    this.runRefund(keys.length, ...keys, ...args).catch(() => {});
  }

  /**
   * Post-charges are rare (one per response carrying Tollgate-Cost): not coalesced. Like a
   * check, the script is given the deadline: a charge reported as not recorded was not.
   */
  charge(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]> {
    const deadline = localNow() + this.timeoutMs;
    return this.perSlot(
      checks,
      (part) => {
        const clock = this.clockOf(this.shardOfSlot(this.slotOf(part[0]!.key)));
        const redisDeadline = clock.toRedis(deadline);
        const args: (string | number)[] = part.map((c) => c.key);
        args.push(nowMs === undefined ? "" : nowMs, redisDeadline === undefined ? "" : redisDeadline);
        pushLimitArgs(args, part);
        const sentAt = localNow();
        return this.runCharge(part.length, ...args).then((reply) => {
          const header = parseScriptHeader(reply);
          clock.sample(header.redisMs, sentAt, localNow());
          if (header.expired) throw new StoreTimeoutError(this.timeoutMs);
          return parseChargeReply(header.body, part.length);
        });
      },
      deadline,
    );
  }

  /**
   * Runs a multi-key script once per slot its keys fall in (once in all on a single Redis) and
   * puts the per-limit results back in the order of `checks`. Post-charges and admin reads need
   * no atomicity across a caller's hash tags.
   */
  private perSlot(
    checks: readonly LimitCheck[],
    run: (part: LimitCheck[]) => Promise<ChargedLimit[]>,
    deadline = localNow() + this.timeoutMs,
  ): Promise<ChargedLimit[]> {
    const groups = this.groupBySlot(checks);
    const out: ChargedLimit[] = new Array(checks.length);
    return this.boundedUntil(
      deadline,
      Promise.all(
        [...groups.values()].map((indexes) =>
          run(indexes.map((i) => checks[i]!)).then((results) => {
            indexes.forEach((i, j) => {
              out[i] = results[j]!;
            });
          }),
        ),
      ),
    ).then(() => out);
  }

  /**
   * One ZREM per lease. A request's leases may sit under different hash tags (a `by: ip` route
   * limit beside a client's), so they are not one multi-key script; auto-pipelining still sends
   * them together.
   */
  release(leases: readonly Lease[]): Promise<void> {
    return this.bounded(Promise.all(leases.map((l) => this.client.zrem(l.key, l.leaseId)))).then(
      () => undefined,
    );
  }

  renew(leases: readonly Lease[], nowMs?: number): Promise<void> {
    const byKey = new Map<string, Lease[]>();
    for (const l of leases) byKey.set(l.key, [...(byKey.get(l.key) ?? []), l]);
    return this.bounded(
      Promise.all(
        [...byKey].map(([key, held]) =>
          this.runRenew(
            1,
            key,
            nowMs === undefined ? "" : nowMs,
            held[0]!.leaseMs,
            ...held.map((l) => l.leaseId),
          ),
        ),
      ),
    ).then(() => undefined);
  }

  peek(checks: readonly LimitCheck[], nowMs?: number): Promise<ChargedLimit[]> {
    return this.perSlot(checks, (part) => {
      const args: (string | number)[] = part.map((c) => c.key);
      args.push(nowMs === undefined ? "" : nowMs);
      for (const c of part) {
        const algorithm = ALGORITHMS[c.spec.algorithm];
        args.push(algorithm.code, ...algorithm.scriptParams(c.spec));
      }
      return this.runPeek(part.length, ...args).then((reply) => parseChargeReply(reply, part.length));
    });
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
    await this.flushTopCounts();
    const flat = await this.bounded(
      this.client.call("ZUNION", topKeys.length, ...topKeys, "WITHSCORES") as Promise<string[]>,
    );
    const out: { caller: string; count: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ caller: flat[i]!, count: Number(flat[i + 1]) });
    return out.sort((a, b) => b.count - a.count || (a.caller < b.caller ? -1 : 1)).slice(0, n);
  }

  /** One DEL per key: in a cluster a multi-key DEL must stay within one slot. */
  reset(keys: readonly string[]): Promise<number> {
    if (keys.length === 0) return Promise.resolve(0);
    return this.bounded(Promise.all(keys.map((k) => this.client.del(k)))).then((counts) =>
      counts.reduce((a, b) => a + b, 0),
    );
  }

  /** Every call other than a check is bounded by the same timeout. */
  private bounded<T>(work: Promise<T>): Promise<T> {
    return withDeadline(work, this.timeoutMs, () => new StoreTimeoutError(this.timeoutMs));
  }

  /**
   * `work`, or a StoreTimeoutError once the local clock has passed `deadline` (re-armed like a
   * batch's, so never before it: a script given that deadline has given up by then).
   */
  private boundedUntil<T>(deadline: number, work: Promise<T>): Promise<T> {
    return withDeadlineAt(work, deadline, localNow, () => new StoreTimeoutError(this.timeoutMs));
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
    const until = Date.now() + timeoutMs;
    const ready =
      this.isConnected() ||
      (await new Promise<boolean>((resolve) => {
        const done = (ok: boolean) => {
          clearTimeout(timer);
          this.client.off("ready", onReady);
          resolve(ok);
        };
        const onReady = () => done(true);
        const timer = setTimeout(() => done(false), timeoutMs);
        this.client.once("ready", onReady);
      }));
    if (!ready || !this.clustered) return ready;
    // A cluster is "ready" once the slot map is known; its masters are connected apart (see
    // the constructor). Wait for them too, within what is left, so that the first requests do
    // not pay for it; a master that does not come up in time is the breaker's business.
    const masters = (this.client as Cluster).nodes("master");
    await Promise.race([
      Promise.all(masters.map((node) => node.ping().catch(() => undefined))),
      new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())).unref()),
    ]);
    return true;
  }

  async close(): Promise<void> {
    await this.flushTopCounts();
    this.client.disconnect();
  }
}

/** KEYS a denial record adds to a request: its log, and the top bucket unless it is counted apart. */
function recordKeyCount(record: DenialRecord | undefined): number {
  if (!record) return 0;
  return record.topKey ? 2 : 1;
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
  /** The deadline that passed, in ms. */
  readonly ms: number;
  constructor(ms: number) {
    super(`the limit store did not answer within ${ms} ms`);
    this.name = "StoreTimeoutError";
    this.ms = ms;
  }
}

export class StoreReplyError extends Error {
  constructor(message: string) {
    super(`unexpected reply from the limit script: ${message}`);
    this.name = "StoreReplyError";
  }
}

/** What check.lua and charge.lua reply first: the Redis time they read, and whether they ran. */
export interface ScriptHeader {
  /** Redis's clock as the script used it ("%.17g" ms). */
  clock: string;
  redisMs: number;
  /** Past the deadline it was given: the script wrote nothing. */
  expired: boolean;
  /** The rest of the reply. */
  body: unknown[];
}

export function parseScriptHeader(reply: unknown): ScriptHeader {
  if (!Array.isArray(reply) || reply.length < 2 || typeof reply[0] !== "string") {
    throw new StoreReplyError("expected the Redis time first");
  }
  const redisMs = Number(reply[0]);
  if (!Number.isFinite(redisMs) || (reply[1] !== 0 && reply[1] !== 1)) {
    throw new StoreReplyError("expected the Redis time and 1 or 0 first");
  }
  return { clock: reply[0], redisMs, expired: reply[1] === 0, body: reply.slice(2) };
}

/** charge.lua's reply after its header: per limit, remaining and reset_ms after the debit. */
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
export function parseCheckReply(
  reply: unknown,
  limitsPerRequest: readonly number[],
  batched?: readonly (readonly boolean[])[],
): StoreDecision[] {
  const expected = limitsPerRequest.reduce((n, limits) => n + 1 + limits * 4, 0);
  if (!Array.isArray(reply) || reply.length !== expected) {
    throw new StoreReplyError(`expected an array of ${expected} integers`);
  }
  for (const v of reply) if (typeof v !== "number") throw new StoreReplyError("expected integers");
  const values = reply as number[];
  const decisions: StoreDecision[] = [];
  let at = 0;
  for (const [r, limits] of limitsPerRequest.entries()) {
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
      if (limitAllowed && batched?.[r]?.[i]) {
        if (wait > 0) outcome.taken = wait;
      } else if (limitAllowed && wait > 0) outcome.delayMs = wait;
      outcomes.push(outcome);
    }
    decisions.push({ allowed, outcomes });
  }
  return decisions;
}
