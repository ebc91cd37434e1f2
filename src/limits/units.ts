// How a limit's units read to people (429 bodies, the admin API, logs): requests, tokens, or
// dollars for a money budget, whose state counts integer micro-dollars.
import type { SpecBase } from "./spec-base.js";

export const MICROS_PER_USD = 1_000_000;

/** `12 requests`, `100000 tokens`, `$1.50`. */
export function quantity(spec: SpecBase, n: number): string {
  if (spec.unit === "usd") return formatUsd(n);
  return `${n} ${spec.unit === "tokens" ? "tokens" : "requests"}`;
}

/** Micro-dollars as dollars: at least two decimals, at most six, `-` before the sign when in debt. */
export function formatUsd(micros: number): string {
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(Math.round(micros));
  const whole = Math.floor(abs / MICROS_PER_USD);
  const fraction = String(abs % MICROS_PER_USD)
    .padStart(6, "0")
    .replace(/0{1,4}$/, "");
  return `${sign}$${whole}.${fraction.padEnd(2, "0")}`;
}

/** Micro-dollars as a number of dollars, for JSON answers (exact to the micro-dollar). */
export function usdOf(micros: number): number {
  return Math.round(micros) / MICROS_PER_USD;
}
