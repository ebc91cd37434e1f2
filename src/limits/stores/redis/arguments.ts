// How each script call is laid out as KEYS and ARGV (the lua/ files document the same layout at
// their top). Encoding only: no client, no clock. A calendar window's param 2 depends on the
// time (the period starts around it, windows.ts): each call is given the store's estimate of
// the time its script decides at, used where no test's now is given.
import { ALGORITHMS, isRateLimit, scriptCostArg } from "../../algorithms/index.js";
import type { LimitCheck, StoreDecision } from "../../spec.js";
import type { Lease } from "../contract.js";
import { SHADOW_FLAG } from "./scripts.js";

// Per request of a batch: shared rather than built per call.
const MARK_SHADOW = { markShadow: true } as const;
const NO_SHADOW = { markShadow: false } as const;

/** One request of a check.lua batch. */
export interface CheckRequest {
  readonly checks: readonly LimitCheck[];
  /** The time to decide at (tests only); undefined: Redis's clock. */
  readonly nowMs: number | undefined;
  /** The caller's denial log, where a denial is recorded; undefined: not recorded. */
  readonly logKey: string | undefined;
  /** The current top-list bucket; "" when the script does not count it (in a cluster). */
  readonly topKey: string;
  /** check.lua's denial record text ("" when not recorded), see DenialTexts. */
  readonly denialText: string;
}

/** KEYS a denial record adds to a request: its log, and the top bucket unless it is counted apart. */
export function denialKeyCount(request: CheckRequest): number {
  if (request.logKey === undefined) return 0;
  return request.topKey ? 2 : 1;
}

/**
 * check.lua's KEYS then ARGV for a batch; `deadline` in Redis's clock, undefined when unknown;
 * `redisNowMs`, the store's estimate of Redis's clock now.
 */
export function checkArguments(
  requests: readonly CheckRequest[],
  deadline: number | undefined,
  redisNowMs: number,
): (string | number)[] {
  const args: (string | number)[] = [];
  for (const r of requests) {
    for (const c of r.checks) args.push(c.key);
    if (r.logKey !== undefined) {
      args.push(r.logKey);
      if (r.topKey) args.push(r.topKey);
    }
  }
  args.push(requests.length, deadline === undefined ? "" : deadline);
  for (const r of requests) {
    args.push(r.nowMs === undefined ? "" : r.nowMs, r.checks.length, denialKeyCount(r), r.denialText);
    pushLimitArgs(args, r.checks, MARK_SHADOW, r.nowMs ?? redisNowMs);
  }
  return args;
}

/** charge.lua's KEYS then ARGV. */
export function chargeArguments(
  checks: readonly LimitCheck[],
  at: { nowMs: number | undefined; deadline: number | undefined; redisNowMs: number },
): (string | number)[] {
  const args: (string | number)[] = checks.map((c) => c.key);
  args.push(at.nowMs === undefined ? "" : at.nowMs, at.deadline === undefined ? "" : at.deadline);
  pushLimitArgs(args, checks, NO_SHADOW, at.nowMs ?? at.redisNowMs);
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
  const args: (string | number)[] = [];
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
 * Per limit, the four arguments check.lua and charge.lua take: algorithm code (plus SHADOW_FLAG
 * for a shadow limit, check.lua only), param 1, param 2 (for a calendar window, the period starts
 * around `nowMs`), and the cost (the lease id for a concurrency limit).
 */
function pushLimitArgs(
  args: (string | number)[],
  checks: readonly LimitCheck[],
  options: { markShadow: boolean },
  nowMs: number,
): void {
  for (const c of checks) {
    const algorithm = ALGORITHMS[c.spec.algorithm];
    const [p1, p2] = algorithm.scriptParams(c.spec, nowMs);
    const code = options.markShadow && c.spec.shadow ? algorithm.code + SHADOW_FLAG : algorithm.code;
    // check.lua: a cost followed by "^<need>" must fit `need` units and takes the cost.
    args.push(code, p1, p2, c.need === undefined ? scriptCostArg(c) : `${scriptCostArg(c)}^${c.need}`);
  }
}
