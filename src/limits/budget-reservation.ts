// What an AI request reserves of its budgets before it is forwarded, in each budget's unit, and
// how far its output can be lowered to fit (ai.clamp). (Not to be confused with the `batch: N`
// reservations of reservations.ts, which hold rate-limit tokens on one instance.)
//
// A request's reservation is a fixed part for its input (the prompt's upper bound) and a part
// per output token it may generate (its ceiling, times the choices it asks for):
//   token budgets take   input + output × choices                                  tokens
//   money budgets take   ceil((input × inputPico + output × choices × outputPico) / 10^6)  µ$
// with prices in pico-dollars per token (a price of $2.50 per million tokens is 2,500,000 pico-
// dollars, i.e. 2.5 µ$, per token). Products are taken in BigInt: a 100 MB prompt at $1,000 per
// million tokens is past 2^53 pico-dollars, and a money budget must not round its way below
// what a request costs.
//
// Both are taken in the same atomic check as the request's rate limits, so N requests in flight
// together hold no more than their budgets had left; settle.ts gives back or charges the
// difference once the upstream reports what the request used.
import type { BudgetUnit } from "./spec.js";

export interface BudgetReservation {
  /** Output tokens per choice the request may generate: the ceiling forwarded in its body. */
  output: number;
  /** Completions generated for it (`n`, `best_of`): its output is reserved this many times. */
  choices: number;
  /** The least `output` it may be lowered to when a budget cannot hold it (ai.clamp); undefined: never lowered. */
  minOutput: number | undefined;
  /** Tokens its input may count at most: the prompt's upper bound. */
  input: number;
  /** Pico-dollars per input token and per output token, from the price table (0: no money budget). */
  inputPico: number;
  outputPico: number;
}

const PICO_PER_MICRO = 1_000_000n;

/** What a budget of `unit` takes for `r` with `output` tokens per choice. */
export function reservedUnits(r: BudgetReservation, unit: BudgetUnit, output = r.output): number {
  if (unit === "tokens") return r.input + output * r.choices;
  const pico = BigInt(r.input) * BigInt(r.inputPico) + BigInt(output * r.choices) * BigInt(r.outputPico);
  return Number(ceilDiv(pico, PICO_PER_MICRO));
}

/** Micro-dollars a usage costs: pico-dollar products summed, rounded up once. */
export function microDollars(parts: readonly (readonly [tokens: number, pico: number])[]): number {
  let pico = 0n;
  for (const [tokens, price] of parts) pico += BigInt(tokens) * BigInt(price);
  return Number(ceilDiv(pico, PICO_PER_MICRO));
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return a <= 0n ? 0n : (a + b - 1n) / b;
}

/**
 * The most output tokens per choice (at most `r.output`) that every budget can still hold, given
 * what each has left; below `r.minOutput` (or when the input alone does not fit) undefined: the
 * request is refused. Integer arithmetic, so a clamped request is never refused by its own
 * rounding: each budget's reservedUnits at the answer is at most its `remaining`.
 */
export function fitOutput(
  r: BudgetReservation,
  budgets: readonly { unit: BudgetUnit; remaining: number }[],
): number | undefined {
  if (r.minOutput === undefined) return undefined;
  // A request asking for less than the minimum is never lowered below what it asked.
  const least = Math.min(r.minOutput, r.output);
  let fit = r.output;
  for (const b of budgets) {
    fit = Math.min(fit, outputWithin(r, b.unit, b.remaining));
    if (fit < least) return undefined;
  }
  return fit;
}

/** The most output per choice a budget with `remaining` can hold for `r` (negative: not even the input). */
function outputWithin(r: BudgetReservation, unit: BudgetUnit, remaining: number): number {
  const choices = Math.max(1, r.choices);
  if (unit === "tokens") return Math.floor((remaining - r.input) / choices);
  // ceil(x / 10^6) ≤ remaining ⇔ x ≤ remaining × 10^6, x = input × inPico + out × choices × outPico.
  const room =
    BigInt(Math.max(0, Math.floor(remaining))) * PICO_PER_MICRO - BigInt(r.input) * BigInt(r.inputPico);
  if (room < 0n) return -1;
  if (r.outputPico === 0) return r.output;
  return Number(room / (BigInt(choices) * BigInt(r.outputPico)));
}
