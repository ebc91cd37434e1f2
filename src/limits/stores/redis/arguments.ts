// How each script call is laid out as KEYS and ARGV (the lua/ files document the same layout at
// their top). Encoding only: no client, no clock. A calendar window's param 2 depends on the
// time (the period starts around it, windows.ts): each call is given the store's estimate of
// the time its script decides at, used where no test's now is given.
import { ALGORITHMS, isRateLimit, scriptCostArg } from "../../algorithms/index.js";
import type { LimitCheck, LimitSpec, StoreDecision } from "../../spec.js";
import type { GiveBack, Lease } from "../contract.js";
import { SHADOW_FLAG } from "./scripts.js";

/** One request of a check.lua batch. */
export interface CheckRequest {
  readonly checks: readonly LimitCheck[];
  /** The time to decide at (tests only); undefined: Redis's clock. */
  readonly nowMs: number | undefined;
}

/**
 * check.lua's KEYS then ARGV for a batch; `deadline` in Redis's clock, undefined when unknown;
 * `redisNowMs`, the store's estimate of Redis's clock now. Each distinct algorithm and params
 * go once into the batch's spec table; a limit is sent as its index there (and its cost when
 * that is not 1), so a request costs Redis one string per limit and one of its own.
 */
export function checkArguments(
  requests: readonly CheckRequest[],
  deadline: number | undefined,
  redisNowMs: number,
): (string | number)[] {
  const args: (string | number)[] = [];
  const perRequest: (string | number)[] = [];
  const table = new SpecTable();
  for (const r of requests) {
    perRequest.push(r.nowMs === undefined ? r.checks.length : `${r.checks.length}@${r.nowMs}`);
    const nowMs = r.nowMs ?? redisNowMs;
    for (const c of r.checks) {
      args.push(c.key);
      const index = table.indexOf(c, nowMs);
      const cost = c.need === undefined ? scriptCostArg(c) : `${scriptCostArg(c)}^${c.need}`;
      perRequest.push(cost === 1 ? index : `${index}|${cost}`);
    }
  }
  args.push(requests.length, deadline === undefined ? "" : deadline, table.size);
  for (const v of table.values) args.push(v);
  for (const v of perRequest) args.push(v);
  return args;
}

/**
 * The distinct (algorithm code with its shadow flag, param 1, param 2) of one batch, numbered
 * from 1 in the order first seen. Found again by the limit's spec (compiled once per
 * configuration), then by its params: a calendar window's param 2 depends on the time.
 */
class SpecTable {
  private readonly bySpec = new Map<
    LimitSpec,
    { index: number; p1: string | number; p2: string | number }[]
  >();
  readonly values: (string | number)[] = [];
  size = 0;

  indexOf(c: LimitCheck, nowMs: number): number {
    const algorithm = ALGORITHMS[c.spec.algorithm];
    const [p1, p2] = algorithm.scriptParams(c.spec, nowMs);
    let seen = this.bySpec.get(c.spec);
    if (seen === undefined) {
      seen = [];
      this.bySpec.set(c.spec, seen);
    }
    for (const s of seen) if (s.p1 === p1 && s.p2 === p2) return s.index;
    const index = ++this.size;
    seen.push({ index, p1, p2 });
    this.values.push(c.spec.shadow ? algorithm.code + SHADOW_FLAG : algorithm.code, p1, p2);
    return index;
  }
}

/** charge.lua's KEYS then ARGV. */
export function chargeArguments(
  checks: readonly LimitCheck[],
  at: { nowMs: number | undefined; deadline: number | undefined; redisNowMs: number },
): (string | number)[] {
  const args: (string | number)[] = checks.map((c) => c.key);
  args.push(at.nowMs === undefined ? "" : at.nowMs, at.deadline === undefined ? "" : at.deadline);
  pushLimitArgs(args, checks, at.nowMs ?? at.redisNowMs);
  return args;
}

/** peek.lua's KEYS then ARGV: each limit's code and params, no cost. */
export function peekArguments(
  checks: readonly LimitCheck[],
  nowMs: number | undefined,
  redisNowMs: number,
): (string | number)[] {
  const args: (string | number)[] = checks.map((c) => c.key);
  args.push(nowMs === undefined ? "" : nowMs);
  for (const c of checks) {
    const algorithm = ALGORITHMS[c.spec.algorithm];
    args.push(algorithm.code, ...algorithm.scriptParams(c.spec, nowMs ?? redisNowMs));
  }
  return args;
}

/** renew.lua's KEYS then ARGV, for the leases held under one key. */
export function renewArguments(held: readonly Lease[], nowMs: number | undefined): (string | number)[] {
  return [held[0]!.key, nowMs === undefined ? "" : nowMs, held[0]!.leaseMs, ...held.map((l) => l.leaseId)];
}

/** What a check took, for a give-back: its request's checks, the decision, and when it was decided. */
export interface Taken {
  checks: readonly LimitCheck[];
  decision: StoreDecision;
  /** The time check.lua decided at, exactly as it used it (its clock's "%.17g", or a test's now). */
  at: string | number;
}

/**
 * refund.lua's KEYS and ARGV for what allowed requests took (their units, their leases), or
 * undefined when nothing was taken. A shadow limit that would have denied took nothing.
 */
export function refundArguments(
  taken: readonly Taken[],
): { keys: string[]; args: (string | number)[] } | undefined {
  const keys: string[] = [];
  // The Redis clock decides what "now" is (refund.lua's ARGV[1]).
  const args: (string | number)[] = [""];
  for (const t of taken) {
    if (!t.decision.allowed) continue;
    t.checks.forEach((c, i) => {
      const outcome = t.decision.outcomes[i];
      if (!outcome?.allowed) return;
      let units: string | number;
      if (!isRateLimit(c.spec)) {
        if (c.leaseId === undefined) return;
        units = c.leaseId;
      } else {
        units = c.batch === undefined ? c.cost : (outcome.taken ?? c.cost);
        if (!(units > 0)) return;
      }
      const algorithm = ALGORITHMS[c.spec.algorithm];
      // The periods around the time the check decided at: refund.lua finds the one it took from.
      const [p1, p2] = algorithm.scriptParams(c.spec, Number(t.at));
      keys.push(c.key);
      args.push(t.at, algorithm.code, p1, p2, units);
    });
  }
  return keys.length === 0 ? undefined : { keys, args };
}

/**
 * refund.lua's KEYS and ARGV for units to give back (what an AI request reserved beyond what it
 * used), in the layout refundArguments uses; undefined when there is nothing to give.
 */
export function giveBackArguments(
  giveBacks: readonly GiveBack[],
  nowMs?: number,
): { keys: string[]; args: (string | number)[] } | undefined {
  const keys: string[] = [];
  const args: (string | number)[] = [nowMs === undefined ? "" : nowMs];
  for (const g of giveBacks) {
    if (!isRateLimit(g.check.spec) || !(g.units > 0)) continue;
    const algorithm = ALGORITHMS[g.check.spec.algorithm];
    const [p1, p2] = algorithm.scriptParams(g.check.spec, Number(g.at));
    keys.push(g.check.key);
    args.push(g.at, algorithm.code, p1, p2, g.units);
  }
  return keys.length === 0 ? undefined : { keys, args };
}

/**
 * Per limit, the four arguments charge.lua takes: algorithm code, param 1, param 2 (for a
 * calendar window, the period starts around `nowMs`), and the cost.
 */
function pushLimitArgs(args: (string | number)[], checks: readonly LimitCheck[], nowMs: number): void {
  for (const c of checks) {
    const algorithm = ALGORITHMS[c.spec.algorithm];
    const [p1, p2] = algorithm.scriptParams(c.spec, nowMs);
    args.push(algorithm.code, p1, p2, scriptCostArg(c));
  }
}
