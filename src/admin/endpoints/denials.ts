// GET /admin/denials/top?n=10[&minutes=5]: the callers denied most over the last hour (or the last
// minutes, in steps of five), from the store's
// five-minute buckets (every instance's denials, this one's pending ones flushed first).
import type { Runtime } from "../../config/compile.js";
import type { Limiter } from "../../limits/limiter.js";
import { lastHourTopKeys } from "../../limits/state-keys.js";
import type { DenialLog } from "../../limits/stores/contract.js";
import { replyProblem, sendJson } from "../reply.js";
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

/**
 * `?minutes=` from the query: the last hour unless given, else a multiple of the five-minute
 * bucket up to 60 (the current bucket, partly elapsed, is one of them); undefined: not one.
 */
export function windowMinutes(text: string | null): number | undefined {
  if (text === null) return 60;
  const m = Number(text);
  return /^\d+$/.test(text) && m >= 5 && m <= 60 && m % 5 === 0 ? m : undefined;
}

export function topDenials(deps: TopDenialsDeps): AdminHandler {
  const now = deps.now ?? Date.now;
  return async ({ res, query }) => {
    const n = topCount(query.get("n"));
    const minutes = windowMinutes(query.get("minutes"));
    if (minutes === undefined) {
      replyProblem(
        res,
        "bad_denials_query",
        `minutes "${query.get("minutes")}" is not 5, 10, … 60: the top list is kept in five-minute buckets over the last hour`,
      );
      return;
    }
    const rt = deps.runtime();
    const top = await deps.fromStore(async () => {
      await deps.limiter().flushDenials();
      return deps.store().topDenials(lastHourTopKeys(rt.store.prefix, now(), minutes * 60_000), n);
    });
    sendJson(res, 200, {
      window_seconds: minutes * 60,
      callers: top.map((t) => ({ caller: t.caller, denials: t.count })),
    });
  };
}
