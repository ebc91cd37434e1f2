// A request whose limits live under different hash tags (a route budget or a `by: ip` route
// limit beside a caller's own limits) cannot be one script call in a cluster. Its limits are
// decided slot by slot, the caller's own first, each slot's part atomic on its own. A later
// slot that denies, or gives no decision, is followed by a give-back (refund.lua) of what the
// earlier slots took, so a route budget's denial leaves the caller's limits as they were (a
// denial is answered once its give-back landed). That
// is compensation, not atomicity: between the take and the give-back another request may see
// the caller's limits lower than they end up (docs/scaling.md says so), and the answer reports
// the earlier slots' limits as they were decided, before the give-back. A give-back that fails
// leaves the units to their window and the leases to their expiry, as any refund does.
//
// Every part carries the request's denial record: the first part that denies is the last one
// asked, and the batcher records its denial (with the limits of that part that denied).
import type { LimitCheck, LimitOutcome, StoreDecision } from "../../spec.js";
import type { CheckOptions } from "../contract.js";
import type { Taken } from "./arguments.js";
import type { CheckBatcher } from "./batcher.js";
import type { Slots } from "./slots.js";

export interface CrossSlotParts {
  batcher: CheckBatcher;
  slots: Slots;
}

export async function checkAcrossSlots(
  parts: CrossSlotParts,
  checks: readonly LimitCheck[],
  options: CheckOptions | undefined,
): Promise<StoreDecision> {
  const { batcher, slots } = parts;
  const groups = slots.group(checks);
  const outcomes: LimitOutcome[] = new Array(checks.length);
  // When each check was decided: its slot's script clock (a give-back finds its window by it).
  const decidedAt: (string | number)[] = new Array(checks.length);
  // What the slots decided so far took: one give-back per slot (refund.lua's keys share a slot).
  const taken: Taken[] = [];
  const giveBack = () => Promise.all(taken.map((t) => batcher.refund([t])));
  for (const [slot, indexes] of groups) {
    const part = indexes.map((i) => checks[i]!);
    let decision: StoreDecision;
    try {
      decision = await batcher.enqueuePart(slot, part, options);
    } catch (err) {
      // The request is answered without the store's decision: what earlier slots took goes back
      // (not waited for: the store is failing, and the answer must not wait on it twice).
      void giveBack();
      throw err;
    }
    indexes.forEach((i, j) => {
      outcomes[i] = decision.outcomes[j]!;
    });
    if (!decision.allowed) {
      // This slot's part took nothing (check.lua: a request is all or nothing); earlier slots'
      // parts did, and the request is not admitted: they go back before it is answered, so the
      // caller's next request (and the 429's own headers' next reading) sees them back.
      await giveBack();
      // Limits not reached yet report nothing taken: what a zero-cost look would see.
      for (let i = 0; i < checks.length; i++) {
        outcomes[i] ??= { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
      }
      return { allowed: false, outcomes };
    }
    const at = batcher.decidedAt(decision);
    if (at !== undefined) {
      taken.push({ checks: part, decision, at });
      for (const i of indexes) decidedAt[i] = at;
    }
  }
  return { allowed: true, outcomes, decidedAt };
}
