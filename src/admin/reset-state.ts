// Limit state an operator resets (DELETE /admin/callers/…, DELETE /admin/limits/…), reset the one
// way: this process's deny cache forgets the keys at once, Redis deletes them, and then every
// other instance and worker hears of it on the change feed and forgets them too (within a second;
// the feed's 5 s reconcile if a pub/sub message is lost). Announced after the delete, so no
// instance asks Redis again before the state is gone and caches the old denial anew; without the
// announcement another instance would deny until the retry-after it had cached (45 minutes, in
// an attack pass).
import type { Limiter } from "../limits/limiter.js";
import type { Inspector } from "../limits/stores/contract.js";
import type { FromStore } from "./store-failure.js";

export interface ResetDeps {
  store: () => Pick<Inspector, "reset">;
  /** The live limiter: its deny cache forgets the keys reset. */
  limiter: () => Pick<Limiter, "forgetDenials">;
  fromStore: FromStore;
  /** Tells the other instances (and workers) to forget their cached denials of reset keys. */
  announceReset?: ((keys: readonly string[]) => Promise<void>) | undefined;
}

/** Resets `keys` everywhere; how many Redis deleted. */
export async function resetState(deps: ResetDeps, keys: readonly string[]): Promise<number> {
  deps.limiter().forgetDenials(keys);
  const deleted = await deps.fromStore(() => deps.store().reset(keys));
  const announce = deps.announceReset;
  if (announce) await deps.fromStore(() => announce(keys));
  return deleted;
}
