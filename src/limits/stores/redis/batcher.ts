// The per-slot group commit of checks: the checks asked while a slot has a batch in flight go to
// Redis as one EVALSHA of check.lua when its reply comes, decided in arrival order, each request
// atomic on its own. With nothing in flight a check goes out at the end of the current turn of
// the event loop. Batches so grow with the load, and the per-command cost of the client, the
// socket and Redis is paid once per batch; a check waits at most one round trip more.
//
// Each written batch has a deadline: past it the gateway answers its requests without the store
// (StoreTimeoutError), the script is told the same deadline in Redis's clock and writes nothing
// if it runs later, and a reply that still comes late and allowed is given back (refunded).
import { atDeadline, type DeadlineTimer } from "../../../deadline.js";
import { type StoreError, StoreReplicationError } from "../../../errors.js";
import type { LimitCheck, StoreDecision } from "../../spec.js";
import type { CheckOptions, DenialRecord } from "../contract.js";
import { type CheckRequest, checkArguments, refundArguments, type Taken } from "./arguments.js";
import type { Boundary } from "./boundary.js";
import { localNow, type ShardClocks } from "./clock.js";
import type { CheckCommand, ReplicaWait, ScriptCommand } from "./commands.js";
import { parseCheckReply, parseScriptHeader, type ScriptHeader } from "./replies.js";
import type { Slots } from "./slots.js";

/** Bounds one EVALSHA: Redis parses arguments in one go and the script runs without yielding. */
export const MAX_BATCH_REQUESTS = 128;
export const MAX_BATCH_KEYS = 512;

interface BatchItem extends CheckRequest {
  /** Part of a request spread over several slots: its decision's time is kept for a give-back. */
  crossSlot: boolean;
  /** Where a denial of this request is recorded; undefined: it is not. */
  denial: DenialRecord | undefined;
  resolve: (decision: StoreDecision) => void;
  reject: (err: StoreError) => void;
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

export interface BatcherParts {
  slots: Slots;
  clocks: ShardClocks;
  boundary: Boundary;
  check: CheckCommand;
  refund: ScriptCommand;
  /** store.replicas: a batch whose writes fewer replicas hold is not answered as decided. */
  replicas: ReplicaWait | undefined;
  /**
   * A request with a denial record was denied, by check.lua at `atMs` (Redis's clock, or the
   * test's now): the record is written after the fact (the script is sent nothing of it).
   */
  denied(record: DenialRecord, checks: readonly LimitCheck[], decision: StoreDecision, atMs: number): void;
  /**
   * Once per batch: its requests were decided (true), or they failed (false: an error, the
   * deadline, or admissions the replicas did not confirm). The Sentinel recheck listens here,
   * once per batch rather than once per request.
   */
  outcome?(decided: boolean): void;
}

export class CheckBatcher {
  private readonly open = new Map<number, Batch>();
  /** Batches sent and not yet answered, per slot. */
  private readonly inFlight = new Map<number, number>();
  private flushScheduled = false;

  constructor(private readonly parts: BatcherParts) {}

  /** Decides one request whose keys all fall in `slot`. */
  enqueue(
    slot: number,
    checks: readonly LimitCheck[],
    options: CheckOptions | undefined,
  ): Promise<StoreDecision> {
    return this.add(slot, checks, options, false);
  }

  /** Decides the part of a request that falls in `slot`; its decision's time is kept (decidedAt). */
  enqueuePart(
    slot: number,
    checks: readonly LimitCheck[],
    options: CheckOptions | undefined,
  ): Promise<StoreDecision> {
    return this.add(slot, checks, options, true);
  }

  /** When check.lua decided a part enqueued with enqueuePart, exactly as it used the time. */
  decidedAt(decision: StoreDecision): string | number | undefined {
    const at = decision.decidedAt;
    return typeof at === "string" || typeof at === "number" ? at : undefined;
  }

  private add(
    slot: number,
    checks: readonly LimitCheck[],
    options: CheckOptions | undefined,
    crossSlot: boolean,
  ): Promise<StoreDecision> {
    return new Promise<StoreDecision>((resolve, reject) => {
      let batch = this.open.get(slot);
      if (!batch) {
        batch = newBatch(slot);
        this.open.set(slot, batch);
        // While a batch of this slot is in flight, the next one fills until its reply comes.
        if (!this.inFlight.has(slot)) this.scheduleFlush();
      }
      const item: BatchItem = {
        checks,
        nowMs: options?.nowMs,
        crossSlot,
        denial: options?.denial,
        resolve,
        reject,
      };
      batch.items.push(item);
      batch.keys += checks.length;
      if (batch.items.length >= MAX_BATCH_REQUESTS || batch.keys >= MAX_BATCH_KEYS) this.flush(batch);
    });
  }

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

  /**
   * Gives up on a batch once the local clock has passed its deadline (never before it, see
   * atDeadline: a script told that deadline never decides after the gateway answered without it).
   */
  private armDeadline(batch: Batch): void {
    batch.timer = atDeadline(batch.deadline, localNow, () => {
      if (batch.settled) return;
      const err = this.parts.boundary.timeout();
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
    const { slots, clocks, boundary } = this.parts;
    this.inFlight.set(batch.slot, (this.inFlight.get(batch.slot) ?? 0) + 1);
    batch.sent = true;
    // The deadline counts from the write, not from the first request's ask: the time a check
    // spends before its batch is written is this process's own (the rest of a busy event-loop
    // turn, or the reply ahead of it read late), and counting it made a loaded gateway declare
    // a healthy store timed out and open its breaker (issue 20.7). A batch waiting behind one
    // in flight is bounded by that one's deadline (see armDeadline).
    batch.deadline = localNow() + boundary.timeoutMs;
    this.armDeadline(batch);
    // The deadline in Redis's clock: past it the script writes nothing and answers "expired", so
    // a check the gateway answered without the store consumes nothing when Redis runs it late.
    // Before the shard's clock is known (its first reply) there is none; a late reply is then
    // given back instead.
    const clock = clocks.of(slots.shardOfSlot(batch.slot));
    const args = checkArguments(batch.items, clock.toRedis(batch.deadline), clock.estimateNow());
    const sentAt = localNow();
    this.parts.check(batch.keys, ...args).then(
      ({ reply, acknowledged }) => {
        const receivedAt = localNow();
        this.land(batch);
        let header: ScriptHeader;
        let decisions: StoreDecision[];
        try {
          header = parseScriptHeader(reply);
          clock.sample(header.redisMs, sentAt, receivedAt);
          // Past its deadline: nothing was written. Late or not, the requests have no decision.
          if (header.expired) throw boundary.timeout();
          decisions = parseCheckReply(header.body, batch.items, header.clock);
        } catch (err) {
          this.settle(batch, boundary.toStoreError(err));
          return;
        }
        if (batch.settled) {
          // Decided after the gateway answered these requests without it: give back what it took.
          void this.refund(
            batch.items.map((item, i) => ({
              checks: item.checks,
              decision: decisions[i]!,
              at: item.nowMs ?? header.clock,
            })),
          );
          return;
        }
        const wanted = this.parts.replicas?.wait;
        if (acknowledged !== undefined && wanted !== undefined && acknowledged < wanted) {
          this.unconfirmed(
            batch,
            decisions,
            header.clock,
            new StoreReplicationError(acknowledged, wanted, this.parts.replicas!.timeoutMs),
          );
          return;
        }
        batch.settled = true;
        batch.timer?.clear();
        this.parts.outcome?.(true);
        for (let i = 0; i < batch.items.length; i++) {
          const item = batch.items[i]!;
          const decision = decisions[i]!;
          if (!decision.allowed && item.denial)
            this.parts.denied(item.denial, item.checks, decision, item.nowMs ?? Number(header.clock));
          item.resolve(decision);
        }
      },
      (err: unknown) => {
        this.land(batch);
        this.settle(batch, boundary.toStoreError(err));
      },
    );
  }

  /**
   * store.replicas: the batch was decided on the master, but fewer replicas than asked hold its
   * writes, so a failover now could forget what it allowed. An admission is not given on such a
   * decision: those requests fail with `err` (on_failure answers them) and what they took is
   * given back. A denial is given as decided: the master saw the caller over its limit, and a
   * refusal cannot be over-admission whatever the replicas hold.
   */
  private unconfirmed(
    batch: Batch,
    decisions: readonly StoreDecision[],
    clock: string | number,
    err: StoreReplicationError,
  ): void {
    batch.settled = true;
    batch.timer?.clear();
    const taken: Taken[] = [];
    for (let i = 0; i < batch.items.length; i++) {
      const item = batch.items[i]!;
      const decision = decisions[i]!;
      if (decision.allowed) {
        taken.push({ checks: item.checks, decision, at: item.nowMs ?? clock });
        item.reject(err);
        continue;
      }
      if (item.denial) this.parts.denied(item.denial, item.checks, decision, item.nowMs ?? Number(clock));
      item.resolve(decision);
    }
    // A master that answers but cannot confirm (cut off from its replicas) is failing.
    this.parts.outcome?.(taken.length === 0);
    if (taken.length > 0) void this.refund(taken);
  }

  /** Fails every request of a batch once (a late reply after a timeout is ignored). */
  private settle(batch: Batch, err: StoreError): void {
    if (batch.settled) return;
    batch.settled = true;
    batch.timer?.clear();
    if (this.open.get(batch.slot) === batch) this.open.delete(batch.slot);
    this.parts.outcome?.(false);
    for (const item of batch.items) item.reject(err);
  }

  /**
   * Gives back, best effort, what allowed requests took (their units, their leases) when the
   * gateway answered them without the store's decision. One script call: the checks of `taken`
   * share a slot. A give-back that fails leaves the units to their window and the leases to
   * their expiry, as before.
   */
  /**
   * Gives back what `taken` took. Resolves once Redis has (or the store timeout passed, or it
   * failed: what could not be given back stays to its window); never rejects.
   */
  refund(taken: readonly Taken[]): Promise<void> {
    const call = refundArguments(taken);
    if (!call) return Promise.resolve();
    return this.parts.boundary.bounded(this.parts.refund(call.keys.length, ...call.keys, ...call.args)).then(
      () => {},
      () => {},
    );
  }
}

function newBatch(slot: number): Batch {
  return {
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
}
