// Parsers for the unit-bearing scalars of the YAML: durations, rates, sizes and percentages.
// Each returns a number in a fixed base unit (milliseconds, per-millisecond, bytes, fraction)
// or null, so the schema can attach the position and the fix to the error.

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

export function formatDuration(ms: number): string {
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
