// Parsers for the unit-bearing scalars of the YAML: durations, rates, sizes and percentages.
// Each returns a number in a fixed base unit (milliseconds, per-millisecond, bytes, fraction)
// or null, so the schema can attach the position and the fix to the error. A limit's window is
// a duration or one calendar period (`1 month`), which is no number of milliseconds. Below
// limits/: the algorithms read and write these forms (config/units.ts re-exports them).
import { type CalendarUnit, NOMINAL_MS } from "./calendar.js";

const DURATION_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const RATE_PERIOD_MS: Record<string, number> = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };
const SIZE_BYTES: Record<string, number> = { b: 1, kb: 1024, mb: 1024 ** 2, gb: 1024 ** 3 };

const DURATION_RE = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/;
const RATE_RE = /^(\d+(?:\.\d+)?)\s*\/\s*(s|m|h|d)$/;
const SIZE_RE = /^(\d+(?:\.\d+)?)\s*(b|kb|mb|gb)?$/i;
const PERCENT_RE = /^(\d+(?:\.\d+)?)%$/;

/** `250ms`, `5s`, `15m`, `1h`, `1d` → milliseconds. */
export function parseDuration(text: string): number | null {
  const m = DURATION_RE.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * DURATION_MS[m[2]!]!;
}

/** A limit's `window: 1 day | 1 week | 1 month`: one calendar period, its zone the config's `calendar.tz`. */
export interface CalendarWindow {
  calendar: CalendarUnit;
}

/** A limit's window: a length in ms, or a calendar period. */
export type WindowLength = number | CalendarWindow;

// "1 month", "1 months": a space, then the unit, singular or plural. Only one period: "2 months"
// is refused rather than read as 60 days or as a two-month budget (which would need to say when
// the pair of months starts).
const CALENDAR_WINDOW_RE = /^(\d+(?:\.\d+)?) (day|week|month)s?$/;

/** What a limit's window may be, as an error says it. */
export const WINDOW_FORMS =
  "a duration such as 15m, 1h or 30d, or a calendar period: 1 day, 1 week or 1 month";

/** `15m`, `1d` (a length) or `1 day`, `1 week`, `1 month` (a calendar period); else why not. */
export function parseWindow(text: string): { window: WindowLength } | { error: string } {
  const trimmed = text.trim();
  const calendar = CALENDAR_WINDOW_RE.exec(trimmed);
  if (calendar) {
    if (calendar[1] === "1") return { window: { calendar: calendar[2] as CalendarUnit } };
    return {
      error: `"${text}" is not a window: a calendar window is one period, 1 day, 1 week or 1 month; for a rolling window write a duration such as ${formatDuration(Number(calendar[1]) * NOMINAL_MS[calendar[2] as CalendarUnit])}`,
    };
  }
  const ms = parseDuration(trimmed);
  if (ms !== null) return { window: ms };
  return { error: `"${text}" is not a window; write ${WINDOW_FORMS}` };
}

/** Whether a window is a calendar period (`1 month`) rather than a length. */
export function isCalendarWindow(window: WindowLength | undefined): window is CalendarWindow {
  return typeof window === "object";
}

/** A window's length in ms; a calendar period's nominal one (a month as 30 days). */
export function windowLengthMs(window: WindowLength): number {
  return typeof window === "number" ? window : NOMINAL_MS[window.calendar];
}

export interface Rate {
  /** How many units per period, as written. */
  count: number;
  periodMs: number;
}

/** `N/s`, `N/m`, `N/h`, `N/d`. */
export function parseRate(text: string): Rate | null {
  const m = RATE_RE.exec(text.trim());
  if (!m) return null;
  return { count: Number(m[1]), periodMs: RATE_PERIOD_MS[m[2]!]! };
}

/** `512`, `64kb`, `1mb`, `2gb` → bytes. */
export function parseSize(text: string): number | null {
  const m = SIZE_RE.exec(text.trim());
  if (!m) return null;
  return Math.floor(Number(m[1]) * SIZE_BYTES[(m[2] ?? "b").toLowerCase()]!);
}

/** `50%` → 0.5. */
export function parsePercent(text: string): number | null {
  const m = PERCENT_RE.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) / 100;
}

/** `1h`, `1500ms`; a calendar window as written (`1 month`). */
const RATE_UNITS: Record<number, string> = { 1000: "s", 60000: "m", 3600000: "h", 86400000: "d" };

/** A parsed rate in the file's notation: `5/s`. */
export function formatRate(rate: Rate): string {
  const unit = RATE_UNITS[rate.periodMs];
  return unit ? `${rate.count}/${unit}` : `${rate.count}/${formatDuration(rate.periodMs)}`;
}

export function formatDuration(ms: WindowLength): string {
  if (typeof ms === "object") return `1 ${ms.calendar}`;
  for (const [unit, size] of [
    ["d", 86_400_000],
    ["h", 3_600_000],
    ["m", 60_000],
    ["s", 1000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}
