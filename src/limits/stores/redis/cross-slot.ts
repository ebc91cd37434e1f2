// A request whose limits live under different hash tags (a `by: ip` route limit beside a
// client's own limits) cannot be one script call in a cluster. Its limits are decided slot by
// slot, the caller's own first; a later denial does not give back what an earlier slot took
// (docs/scaling.md says so), but a later slot that gives no decision does: the request is then
// answered without the store.
import type { LimitCheck, LimitOutcome, StoreDecision } from "../../spec.js";
import type { CheckOptions } from "../contract.js";
import type { Taken } from "./arguments.js";
import type { CheckBatcher } from "./batcher.js";
import type { Slots } from "./slots.js";

export async function checkAcrossSlots(
  parts: { batcher: CheckBatcher; slots: Slots },
  checks: readonly LimitCheck[],
  options: CheckOptions | undefined,
): Promise<StoreDecision> {
  const { batcher, slots } = parts;
  const denial = options?.denial;
  // The denial is recorded by the part under the caller's log's hash tag; the others only decide.
  const undenied: CheckOptions | undefined = denial ? { nowMs: options.nowMs } : options;
  const groups = slots.group(checks);
  const outcomes: LimitOutcome[] = new Array(checks.length);
  const taken: Taken[] = [];
  for (const [slot, indexes] of groups) {
    const part = indexes.map((i) => checks[i]!);
    const sameTag = denial && slots.of(denial.logKey) === slot;
    let decision: StoreDecision;
    try {
      decision = await batcher.enqueuePart(slot, part, sameTag ? options : undenied);
    } catch (err) {
      // The request is answered without the store's decision: what earlier slots took goes back.
      for (const t of taken) batcher.refund([t]);
      throw err;
    }
    const at = batcher.decidedAt(decision);
    if (at !== undefined) taken.push({ checks: part, decision, at });
    indexes.forEach((i, j) => {
      outcomes[i] = decision.outcomes[j]!;
    });
    if (!decision.allowed) {
      // Limits not reached yet report nothing taken: what a zero-cost look would see.
      for (let i = 0; i < checks.length; i++) {
        outcomes[i] ??= { allowed: true, remaining: 0, resetMs: 0, retryAfterMs: 0 };
      }
      return { allowed: false, outcomes };
    }
  }
  return { allowed: true, outcomes };
}
