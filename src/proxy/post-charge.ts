// The upstream's `Tollgate-Cost: N` is what the request really cost. Units beyond the route's
// pre-charged cost are debited after the fact; a lower N is not refunded (the units were already
// granted), and anything that is not a whole number is ignored rather than guessed at.
export const MAX_POST_CHARGE = 1_000_000;

export function extraUnits(header: string | string[] | undefined, preCharged: number): number {
  if (header === undefined) return 0;
  const text = (Array.isArray(header) ? header[0] : header)?.trim() ?? "";
  if (!/^\d{1,7}$/.test(text)) return 0;
  const total = Math.min(Number(text), MAX_POST_CHARGE);
  return Math.max(0, total - preCharged);
}
