// What the scripts answer, read into structured outcomes. Every reply is shape-checked rather
// than trusted through a cast: a wrong reply must fail the call (StoreReplyError), never allow.
import { StoreReplyError } from "../../../errors.js";
import type { LimitCheck, LimitOutcome, StoreDecision } from "../../spec.js";
import type { ChargedLimit } from "../contract.js";

function unexpected(what: string): StoreReplyError {
  return new StoreReplyError(`unexpected reply from the limit script: ${what}`);
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
    throw unexpected("expected the Redis time first");
  }
  const redisMs = Number(reply[0]);
  if (!Number.isFinite(redisMs) || (reply[1] !== 0 && reply[1] !== 1)) {
    throw unexpected("expected the Redis time and 1 or 0 first");
  }
  return { clock: reply[0], redisMs, expired: reply[1] === 0, body: reply.slice(2) };
}

/** charge.lua's (and peek.lua's) reply after its header: per limit, remaining and reset_ms. */
export function parseChargeReply(reply: unknown, limits: number): ChargedLimit[] {
  if (!Array.isArray(reply) || reply.length !== limits * 2 || reply.some((v) => typeof v !== "number")) {
    throw unexpected(`expected ${limits * 2} integers from charge.lua`);
  }
  const values = reply as number[];
  const charged: ChargedLimit[] = [];
  for (let i = 0; i < limits; i++) charged.push({ remaining: values[2 * i]!, resetMs: values[2 * i + 1]! });
  return charged;
}

/**
 * What check.lua's fourth field of a limit means: until the request would fit when the limit
 * denied; when it allowed, the tokens a batched take took, or else the wait for a leaky bucket's
 * slot (0 for the algorithms that never make a request wait).
 */
export type FourthField = "retry_after" | "taken" | "delay";

export function fourthFieldOf(allowed: boolean, check: LimitCheck): FourthField {
  if (!allowed) return "retry_after";
  return check.batch === undefined ? "delay" : "taken";
}

/** One limit's outcome from its four fields. */
function readOutcome(
  check: LimitCheck,
  allowed: boolean,
  remaining: number,
  resetMs: number,
  fourth: number,
) {
  const outcome: LimitOutcome = { allowed, remaining, resetMs, retryAfterMs: 0 };
  const field = fourthFieldOf(allowed, check);
  switch (field) {
    case "retry_after":
      outcome.retryAfterMs = fourth;
      break;
    case "taken":
      if (fourth > 0) outcome.taken = fourth;
      break;
    case "delay":
      if (fourth > 0) outcome.delayMs = fourth;
      break;
    default: {
      const never: never = field;
      throw new Error(`unhandled fourth field ${String(never)}`);
    }
  }
  return outcome;
}

/** The requests of a batch, in the order check.lua decided them. */
export interface CheckedRequest {
  readonly checks: readonly LimitCheck[];
  /** The time it was decided at, when a test gave one (else the script's clock). */
  readonly nowMs?: number | undefined;
}

/**
 * check.lua's reply after its header: per request, allowed, then four fields per limit. `clock`
 * is the script's time (the header's), each decision's decidedAt unless its request gave one.
 */
export function parseCheckReply(
  reply: unknown,
  requests: readonly CheckedRequest[],
  clock: string,
): StoreDecision[] {
  let expected = 0;
  for (const r of requests) expected += 1 + r.checks.length * 4;
  if (!Array.isArray(reply) || reply.length !== expected) {
    throw unexpected(`expected an array of ${expected} integers`);
  }
  for (const v of reply) if (typeof v !== "number") throw unexpected("expected integers");
  const values = reply as number[];
  const decisions: StoreDecision[] = [];
  let at = 0;
  for (const r of requests) {
    const allowed = values[at++] === 1;
    const outcomes: LimitOutcome[] = [];
    for (const check of r.checks) {
      outcomes.push(readOutcome(check, values[at] === 1, values[at + 1]!, values[at + 2]!, values[at + 3]!));
      at += 4;
    }
    decisions.push({ allowed, outcomes, decidedAt: r.nowMs ?? clock });
  }
  return decisions;
}
