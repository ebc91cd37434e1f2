// The upstream's `Tollgate-Cost: N` is what the request really cost. Units beyond the route's
// pre-charged cost are debited after the fact; a lower N is not refunded (the units were already
// granted), and anything that is not a whole number is ignored rather than guessed at. A whole
// number of any length is capped at MAX_POST_CHARGE: a huge cost is still a cost.
export const MAX_POST_CHARGE = 1_000_000;
const CAP_DIGITS = String(MAX_POST_CHARGE).length;

export function extraUnits(header: string | string[] | undefined, preCharged: number): number {
  const total = reportedUnits(header);
  return total === undefined ? 0 : Math.max(0, total - preCharged);
}

/** What `Tollgate-Cost` (in the head or the trailers) says the request cost; undefined: nothing usable. */
export function reportedUnits(header: string | string[] | undefined): number | undefined {
  if (header === undefined) return undefined;
  const text = (Array.isArray(header) ? header[0] : header)?.trim() ?? "";
  // ASCII digits only (no sign, no exponent); leading zeros do not count towards the length.
  if (!/^\d+$/.test(text)) return undefined;
  const digits = text.replace(/^0+(?=\d)/, "");
  return digits.length > CAP_DIGITS ? MAX_POST_CHARGE : Math.min(Number(digits), MAX_POST_CHARGE);
}
