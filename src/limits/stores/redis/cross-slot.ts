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
// The denial record goes with the part in the slot of the caller's log, which check.lua writes
// when that part denies. A part in another slot (the route budget's) cannot name the log: its
// denial is written to the log after the fact, as the deny cache's are.
import type { LimitCheck, LimitOutcome, StoreDecision } from "../../spec.js";
import type { CheckOptions, DenialLog } from "../contract.js";
import type { Taken } from "./arguments.js";
import type { CheckBatcher } from "./batcher.js";
import type { Slots } from "./slots.js";

export interface CrossSlotParts {
  batcher: CheckBatcher;
  slots: Slots;
  /** Writes a denial decided in a slot other than the caller's log's. */
  log?: Pick<DenialLog, "recordDenials">;
}

export async function checkAcrossSlots(
  parts: CrossSlotParts,
  checks: readonly LimitCheck[],
  options: CheckOptions | undefined,
): Promise<StoreDecision> {
  const { batcher, slots } = parts;
  const denial = options?.denial;
  // The denial is recorded by the part under the caller's log's hash tag; the others only decide.
  const undenied: CheckOptions | undefined = denial ? { nowMs: options.nowMs } : options;
  const logSlot = denial ? slots.of(denial.logKey) : undefined;
  const groups = slots.group(checks);
  const outcomes: LimitOutcome[] = new Array(checks.length);
  // What the slots decided so far took: one give-back per slot (refund.lua's keys share a slot).
  const taken: Taken[] = [];
  const giveBack = () => Promise.all(taken.map((t) => batcher.refund([t])));
  for (const [slot, indexes] of groups) {
    const part = indexes.map((i) => checks[i]!);
    let decision: StoreDecision;
    try {
      decision = await batcher.enqueuePart(slot, part, slot === logSlot ? options : undenied);
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
      if (denial && slot !== logSlot && parts.log) {
        const limits = part.filter((c, j) => !decision.outcomes[j]!.allowed && !c.spec.shadow);
        const at = Number(batcher.decidedAt(decision) ?? options?.nowMs ?? Date.now());
        // Best effort, like the script's own record; the store counts the top list (count 0).
        parts.log
          .recordDenials([
            {
              logKey: denial.logKey,
              topKey: denial.topKey,
              caller: denial.caller,
              entries: [{ atMs: at, route: denial.route, limits: limits.map((c) => c.spec.name) }],
              count: 0,
            },
          ])
          .catch(() => {});
      }
      // Limits not reached yet report nothing taken: what a zero-cost look would see.
      for (let i = 0; i < checks.length; i++) {
        outcomes[i] ??= { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
      }
      return { allowed: false, outcomes };
    }
    const at = batcher.decidedAt(decision);
    if (at !== undefined) taken.push({ checks: part, decision, at });
  }
  return { allowed: true, outcomes };
}
