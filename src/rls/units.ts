// Envoy's rate-limit units as tollgate's fixed windows: the one place their lengths are written.
import type { WindowSpec } from "../limits/spec.js";
import type { RlsUnit } from "../model/rls.js";

/** Each unit's window, in seconds: envoyproxy/ratelimit's UnitToDivider (a month is 30 days, a year 365). */
export const UNIT_SECONDS: Readonly<Record<RlsUnit, number>> = {
  second: 1,
  minute: 60,
  hour: 3600,
  day: 86_400,
  week: 7 * 86_400,
  month: 30 * 86_400,
  year: 365 * 86_400,
};

/**
 * A descriptor's limit as tollgate's fixed window: `requestsPerUnit` per window aligned on the
 * unit since the epoch, the alignment envoyproxy/ratelimit's cache keys use ((now / divider) *
 * divider), so both count the same windows.
 */
export function windowSpecOf(
  name: string,
  unit: RlsUnit,
  requestsPerUnit: number,
  shadow: boolean,
): WindowSpec {
  return {
    algorithm: "fixed_window",
    name: `rls:${name}`,
    limit: requestsPerUnit,
    windowMs: UNIT_SECONDS[unit] * 1000,
    ...(shadow ? { shadow: true } : {}),
  };
}
