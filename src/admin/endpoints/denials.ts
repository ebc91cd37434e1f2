// GET /admin/denials/top?n=10: the callers denied most over the last hour, from the store's
// five-minute buckets (every instance's denials, this one's pending ones flushed first).
import type { Runtime } from "../../config/compile.js";
import type { Limiter } from "../../limits/limiter.js";
import { lastHourTopKeys } from "../../limits/state-keys.js";
import type { DenialLog } from "../../limits/stores/contract.js";
import { sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";
import type { FromStore } from "../store-failure.js";

export interface TopDenialsDeps {
  runtime: () => Runtime;
  store: () => Pick<DenialLog, "topDenials">;
  limiter: () => Pick<Limiter, "flushDenials">;
  fromStore: FromStore;
  /** Epoch ms: which buckets are the last hour. */
  now?: () => number;
}

/** `n` from the query: 10 unless a number, then kept within 1..1000. */
export function topCount(n: string | null): number {
  return Math.min(Math.max(Number(n ?? 10) || 10, 1), 1000);
}

export function topDenials(deps: TopDenialsDeps): AdminHandler {
  const now = deps.now ?? Date.now;
  return async ({ res, query }) => {
    const n = topCount(query.get("n"));
    const rt = deps.runtime();
    const top = await deps.fromStore(async () => {
      await deps.limiter().flushDenials();
      return deps.store().topDenials(lastHourTopKeys(rt.store.prefix, now()), n);
    });
    sendJson(res, 200, {
      window_seconds: 3600,
      callers: top.map((t) => ({ caller: t.caller, denials: t.count })),
    });
  };
}
