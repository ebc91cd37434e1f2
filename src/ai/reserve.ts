// What an AI request reserves (limits/budget-reservation.ts), from what its body asks for, its
// route's settings and its model's prices.
import type { BudgetReservation } from "../limits/budget-reservation.js";
import { dearestPrices, type ModelPrice } from "./prices.js";
import type { AiRequest } from "./request.js";
import type { AiSettings } from "./settings.js";

/**
 * The output per completion the request is held to: what it asks for, at most ai.max_output,
 * and ai.max_output when it asks for nothing (or the API's own default where it has one: legacy
 * completions are 16 tokens). Undefined for an operation without output, and
 * for a request that names none on a route without max_output (no budget applies there: the
 * checks require max_output where one does).
 */
export function outputCeiling(request: AiRequest, settings: AiSettings): number | undefined {
  if (request.operation.ceilingFields.length === 0) return undefined;
  // A request that names none gets what its API would give it, if the API says.
  const asked = request.ceiling ?? request.operation.defaultCeiling;
  const cap = settings.maxOutput;
  if (asked === undefined) return cap;
  return cap === undefined ? asked : Math.min(asked, cap);
}

/** The reservation of `request` (a free operation reserves nothing). */
export function reservationOf(
  request: AiRequest,
  settings: AiSettings,
  price: ModelPrice | undefined,
): BudgetReservation {
  const op = request.operation;
  if (op.free) return { output: 0, choices: 1, minOutput: undefined, input: 0, inputPico: 0, outputPico: 0 };
  const output = outputCeiling(request, settings) ?? 0;
  return {
    output,
    choices: request.choices,
    minOutput: settings.clamp && output > 0 ? Math.min(settings.minOutput, output) : undefined,
    input: request.promptBound,
    // The input is priced at the dearest rate any of it can be billed at: Anthropic bills cache
    // writes above plain input, so a bound at the plain rate could fall short.
    inputPico: price ? dearestPrices(price).input : 0,
    outputPico: price ? dearestPrices(price).output : 0,
  };
}
