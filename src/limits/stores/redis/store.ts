// The shared store: every decision is one EVALSHA of check.lua, so all gateway instances that
// point at the same Redis enforce one limit together. This file composes the parts (connection,
// batcher, replies, clocks, denial log) into the Store contract; each part says how it works.
import { Cluster, type Redis } from "ioredis";
import type { LimitCheck, StoreDecision } from "../../spec.js";
import type {
  AtOptions,
  ChargedLimit,
  CheckOptions,
  Denial,
  DenialBatch,
  GiveBack,
  KeyListing,
  Lease,
  ListKeysBounds,
  Store,
} from "../contract.js";
import { DenialQueue, deniedLimitNames } from "../denial-queue.js";
import { chargeArguments, giveBackArguments, peekArguments, renewArguments } from "./arguments.js";
import { CheckBatcher } from "./batcher.js";
import { Boundary } from "./boundary.js";
import { localNow, ShardClocks } from "./clock.js";
import { defineScripts, type ReplicaWait, type ScriptCommands } from "./commands.js";
import { type ConnectionOptions, connect, isReady, waitUntilReady, watchMaster } from "./connection.js";
import { checkAcrossSlots } from "./cross-slot.js";
import { RedisDenialLog } from "./denial-log.js";
import { KeyLister } from "./key-listing.js";
import { parseChargeReply, parseScriptHeader } from "./replies.js";
import { askSentinels } from "./sentinel-ask.js";
import { leaveMaster, masterToMoveTo, SentinelRecheck } from "./sentinel-recheck.js";
import { Slots } from "./slots.js";
import { watchSwitchMaster } from "./switch-master.js";

export interface RedisStoreOptions extends ConnectionOptions {
  /** store.replicas: a check is answered once this many replicas hold its writes. */
  replicas?: ReplicaWait;
  /**
   * Through Sentinel: the client is on a new master (`from` "" on the first). Checks of the new
   * master are a new shard (shardOf), with a breaker and a clock of their own.
   */
  onMasterChange?: (from: string, to: string) => void;
}

export class RedisStore implements Store {
  readonly kind = "redis";
  readonly client: Redis | Cluster;
  /** In a Redis Cluster a script's keys must share a slot: batches and groups are per slot. */
  readonly clustered: boolean;
  private readonly scripts: ScriptCommands;
  private readonly boundary: Boundary;
  private readonly slots: Slots;
  private readonly clocks = new ShardClocks();
  private readonly batcher: CheckBatcher;
  private readonly denialLog: RedisDenialLog;
  /**
   * The denials check.lua decided, written to the callers' logs and the top list once a second,
   * before either is read, and at close: a burst of denials costs a few commands per caller, and
   * a check that is allowed sends nothing of its denial record.
   */
  private readonly pendingDenials: DenialQueue;
  private readonly keyLister: KeyLister;
  /** Through Sentinel: asks the sentinels while checks fail (sentinel-recheck.ts). */
  private readonly recheck: SentinelRecheck | undefined;
  private readonly closeSentinelClients: () => void = () => {};

  constructor(options: RedisStoreOptions) {
    this.boundary = new Boundary(options.timeoutMs);
    this.client = connect(options);
    this.slots = new Slots(this.client);
    this.clustered = this.slots.clustered;
    this.scripts = defineScripts(this.client, options.replicas);
    if (options.sentinel && !(this.client instanceof Cluster)) {
      watchMaster(this.client, (address) => {
        const from = this.slots.master;
        if (address === from) return;
        this.slots.master = address;
        options.onMasterChange?.(from, address);
      });
      const sentinels = askSentinels(options.sentinel, options.timeoutMs);
      const client = this.client;
      const switches = watchSwitchMaster(options.sentinel, options.timeoutMs, (address) => {
        // A client reconnecting is already asking the sentinels; one on `address` stays.
        if (client.status !== "ready" || this.slots.master === "") return;
        if (masterToMoveTo(this.slots.master, [address], 1) !== undefined) leaveMaster(client);
      });
      this.closeSentinelClients = () => {
        sentinels.close();
        switches.close();
      };
      this.recheck = new SentinelRecheck({
        client: this.client,
        ask: sentinels.ask,
        sentinelCount: options.sentinel.nodes.length,
        current: () => this.slots.master,
      });
    }
    this.denialLog = new RedisDenialLog(this.client, this.boundary);
    this.pendingDenials = new DenialQueue(this.denialLog);
    const recheck = this.recheck;
    this.batcher = new CheckBatcher({
      slots: this.slots,
      clocks: this.clocks,
      boundary: this.boundary,
      check: this.scripts.check,
      refund: this.scripts.refund,
      replicas: options.replicas,
      denied: (record, checks, decision, atMs) =>
        this.pendingDenials.add(record, atMs, deniedLimitNames(checks, decision.outcomes)),
      outcome: recheck && ((decided) => (decided ? recheck.succeeded() : recheck.failed())),
    });
    this.keyLister = new KeyLister(this.client, this.slots, this.boundary);
  }

  /** The master serving the slot of the first key: a cluster's, or the sentinels' ("" for a single Redis). */
  shardOf(checks: readonly LimitCheck[]): string {
    return this.slots.shardOf(checks);
  }

  /** Coalesced per slot (batcher.ts); in a cluster a request over several slots is decided slot by slot. */
  check(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> {
    if (checks.length === 0) return Promise.resolve({ allowed: true, outcomes: [] });
    return this.decide(checks, options);
  }

  private decide(checks: readonly LimitCheck[], options?: CheckOptions): Promise<StoreDecision> {
    // A single Redis: one slot.
    if (!this.clustered) return this.batcher.enqueue(0, checks, options);
    const slot = this.slots.of(checks[0]!.key);
    for (const c of checks) {
      if (this.slots.of(c.key) !== slot)
        return checkAcrossSlots({ batcher: this.batcher, slots: this.slots }, checks, options);
    }
    return this.batcher.enqueue(slot, checks, options);
  }

  /**
   * Post-charges are rare (one per response carrying Tollgate-Cost): not coalesced. Like a
   * check, the script is given the deadline: a charge reported as not recorded was not.
   */
  charge(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    const deadline = localNow() + this.boundary.timeoutMs;
    return this.perSlot(checks, deadline, (part) => {
      const clock = this.clocks.of(this.slots.shardOfSlot(this.slots.of(part[0]!.key)));
      const args = chargeArguments(part, {
        nowMs: options?.nowMs,
        deadline: clock.toRedis(deadline),
        redisNowMs: clock.estimateNow(),
      });
      const sentAt = localNow();
      return this.scripts.charge(part.length, ...args).then((reply) => {
        const header = parseScriptHeader(reply);
        clock.sample(header.redisMs, sentAt, localNow());
        if (header.expired) throw this.boundary.timeout();
        return parseChargeReply(header.body, part.length);
      });
    });
  }

  peek(checks: readonly LimitCheck[], options?: AtOptions): Promise<ChargedLimit[]> {
    return this.perSlot(checks, localNow() + this.boundary.timeoutMs, (part) => {
      const clock = this.clocks.of(this.slots.shardOfSlot(this.slots.of(part[0]!.key)));
      return this.scripts
        .peek(part.length, ...peekArguments(part, options?.nowMs, clock.estimateNow()))
        .then((reply) => parseChargeReply(reply, part.length));
    });
  }

  /**
   * Runs a multi-key script once per slot its keys fall in (once in all on a single Redis) and
   * puts the per-limit results back in the order of `checks`. Post-charges and admin reads need
   * no atomicity across a caller's hash tags.
   */
  private perSlot(
    checks: readonly LimitCheck[],
    deadline: number,
    run: (part: LimitCheck[]) => Promise<ChargedLimit[]>,
  ): Promise<ChargedLimit[]> {
    const out: ChargedLimit[] = new Array(checks.length);
    const parts = [...this.slots.group(checks).values()].map((indexes) =>
      run(indexes.map((i) => checks[i]!)).then((results) => {
        indexes.forEach((i, j) => {
          out[i] = results[j]!;
        });
      }),
    );
    return this.boundary.boundedUntil(deadline, Promise.all(parts)).then(() => out);
  }

  /**
   * refund.lua once per slot the give-backs fall in (a request's budgets may sit under several
   * hash tags), within the store's timeout. Rejects when Redis does not answer: the units then
   * stay taken.
   */
  refund(giveBacks: readonly GiveBack[], options?: AtOptions): Promise<void> {
    const bySlot = this.slots.group(giveBacks.map((g) => g.check));
    const calls: Promise<unknown>[] = [];
    for (const indexes of bySlot.values()) {
      const call = giveBackArguments(
        indexes.map((i) => giveBacks[i]!),
        options?.nowMs,
      );
      if (call) calls.push(this.scripts.refund(call.keys.length, ...call.keys, ...call.args));
    }
    return this.boundary.bounded(Promise.all(calls)).then(() => undefined);
  }

  /**
   * One ZREM per lease. A request's leases may sit under different hash tags (a `by: ip` route
   * limit beside a client's), so they are not one multi-key script; auto-pipelining still sends
   * them together.
   */
  release(leases: readonly Lease[]): Promise<void> {
    return this.boundary
      .bounded(Promise.all(leases.map((l) => this.client.zrem(l.key, l.leaseId))))
      .then(() => undefined);
  }

  renew(leases: readonly Lease[], options?: AtOptions): Promise<void> {
    const byKey = new Map<string, Lease[]>();
    for (const l of leases) byKey.set(l.key, [...(byKey.get(l.key) ?? []), l]);
    const renewals = [...byKey.values()].map((held) =>
      this.scripts.renew(1, ...renewArguments(held, options?.nowMs)),
    );
    return this.boundary.bounded(Promise.all(renewals)).then(() => undefined);
  }

  /** One DEL per key: in a cluster a multi-key DEL must stay within one slot. */
  reset(keys: readonly string[]): Promise<number> {
    if (keys.length === 0) return Promise.resolve(0);
    return this.boundary
      .bounded(Promise.all(keys.map((k) => this.client.del(k))))
      .then((counts) => counts.reduce((a, b) => a + b, 0));
  }

  /** SCAN on a single Redis, CLUSTER GETKEYSINSLOT per hash tag in a cluster (key-listing.ts). */
  listKeys(prefixes: readonly string[], bounds: ListKeysBounds): Promise<KeyListing> {
    return this.keyLister.list(prefixes, bounds);
  }

  recordDenials(batch: readonly DenialBatch[]): Promise<void> {
    return this.denialLog.recordDenials(batch);
  }

  /** A caller's log, with the denials decided so far written first. */
  async denials(logKey: string): Promise<Denial[]> {
    await this.pendingDenials.flush();
    return this.denialLog.denials(logKey);
  }

  /** The top list, with the denials decided so far counted first. */
  async topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]> {
    await this.pendingDenials.flush();
    return this.denialLog.topDenials(topKeys, n);
  }

  ping(): Promise<void> {
    return this.client.ping().then(() => undefined, this.boundary.rethrow);
  }

  isConnected(): boolean {
    return isReady(this.client);
  }

  waitUntilReady(timeoutMs: number): Promise<boolean> {
    return waitUntilReady(this.client, timeoutMs);
  }

  async close(): Promise<void> {
    this.recheck?.close();
    this.closeSentinelClients();
    await this.pendingDenials.close();
    this.client.disconnect();
  }
}
