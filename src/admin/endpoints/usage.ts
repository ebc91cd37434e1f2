// GET (and HEAD) /admin/usage/{caller...}?period=2026-12 and /admin/usage?period=…&by=tenant: the
// tokens and requests charged per budget limit in a calendar month or day (the config's
// calendar.tz), from the usage ledger every instance records into (src/usage/). A caller never
// recorded reads as no limits, not as a 404: "nothing used" is an answer. A tenant reads the sum
// of its clients, which the ledger records under the tenant as well. The listing pages: about
// `limit` callers per answer, and `next_cursor` to ask for the rest.
import type { Runtime } from "../../config/compile.js";
import { callerIpKey, parseIp, unwrapMapped } from "../../identity/ip.js";
import { parsePeriod, periodId } from "../../limits/calendar.js";
import type { UsageBy, UsageLedger } from "../../usage/ledger.js";
import { USAGE_PAGE_MAX } from "../../usage/ledger-layout.js";
import { parseCallerRef } from "../caller-limits.js";
import { replyProblem, sendJson } from "../reply.js";
import type { AdminHandler, AdminRequest } from "../router.js";
import type { FromStore } from "../store-failure.js";

export interface UsageEndpointDeps {
  runtime: () => Runtime;
  usage: () => Pick<UsageLedger, "read" | "listPage">;
  fromStore: FromStore;
  /** Epoch ms: which month is the current one. */
  now?: () => number;
}

/** The zone periods are read in: the config's calendar.tz. */
export function usageZone(rt: Runtime): string {
  return rt.config.calendar.tz;
}

/** The largest SSCAN cursor: an unsigned 64-bit number. */
const MAX_CURSOR = 2n ** 64n - 1n;

/** A SSCAN cursor (an unsigned 64-bit number) or the memory ledger's offset. */
const CURSOR = /^\d{1,20}$/;

export function usageEndpoints(deps: UsageEndpointDeps): { show: AdminHandler; list: AdminHandler } {
  const now = deps.now ?? Date.now;

  /** The period asked for (default: the current month), or undefined when answered with a 400. */
  function periodOf({ res, query }: AdminRequest, tz: string): string | undefined {
    const text = query.get("period");
    if (text === null) return periodId(now(), "month", tz);
    if (parsePeriod(text, tz) !== null) return text;
    replyProblem(
      res,
      "bad_usage_query",
      `period "${text}" is neither a month nor a day: write ?period=YYYY-MM (2026-12) or ?period=YYYY-MM-DD (2026-12-01)`,
    );
    return undefined;
  }

  async function show(request: AdminRequest): Promise<void> {
    const rt = deps.runtime();
    const caller = labelOf(request.params.caller!, rt);
    if ("error" in caller) {
      replyProblem(request.res, "bad_caller", caller.error);
      return;
    }
    const period = periodOf(request, usageZone(rt));
    if (period === undefined) return;
    const report = await deps.fromStore(() => deps.usage().read(caller.label, period));
    sendJson(request.res, 200, report);
  }

  async function list(request: AdminRequest): Promise<void> {
    const { res, query } = request;
    const rt = deps.runtime();
    const by = query.get("by") ?? "client";
    if (by !== "client" && by !== "tenant") {
      replyProblem(
        res,
        "bad_usage_query",
        `by "${by}" is not client or tenant: write ?by=client or ?by=tenant`,
      );
      return;
    }
    const cursor = query.get("cursor") ?? undefined;
    // Past 2^64 - 1 Redis refuses it as an error, which would read as the store failing.
    if (cursor !== undefined && (!CURSOR.test(cursor) || BigInt(cursor) > MAX_CURSOR)) {
      replyProblem(
        res,
        "bad_usage_query",
        `cursor "${cursor}" is not one this API gave: pass the next_cursor of the previous answer, or leave it out to start`,
      );
      return;
    }
    const limitText = query.get("limit");
    const limit = limitText === null ? USAGE_PAGE_MAX : Number(limitText);
    if (!/^\d+$/.test(limitText ?? "1") || limit < 1 || limit > USAGE_PAGE_MAX) {
      replyProblem(
        res,
        "bad_usage_query",
        `limit "${limitText}" is not a number of callers from 1 to ${USAGE_PAGE_MAX}: write e.g. ?limit=100`,
      );
      return;
    }
    const period = periodOf(request, usageZone(rt));
    if (period === undefined) return;
    const page = await deps.fromStore(() => deps.usage().listPage(period, by as UsageBy, { cursor, limit }));
    sendJson(res, 200, { period, by, callers: page.callers, next_cursor: page.next });
  }

  return { show, list };
}

/**
 * The ledger's label for a caller as an operator names it: a client or tenant as written, an IP
 * address as the limiter keys it (an IPv4-mapped address unwrapped, IPv6 grouped by
 * identity.ipv6_prefix), so `ip:2001:db8::1` reads the `/64` its requests were recorded under.
 */
export function labelOf(text: string, rt: Runtime): { label: string } | { error: string } {
  const ref = parseCallerRef(text);
  if (!ref) return { error: "name the caller as client:<id>, tenant:<id> or ip:<address>" };
  if (ref.kind !== "ip") return { label: `${ref.kind}:${ref.id}` };
  // A prefix as the list shows it (`2001:db8::/64`) reads as its address.
  const slash = ref.id.indexOf("/");
  const bytes = parseIp(slash === -1 ? ref.id : ref.id.slice(0, slash));
  if (!bytes) return { error: `"${ref.id}" is not an IP address: name the caller as ip:<address>` };
  return { label: `ip:${callerIpKey(unwrapMapped(bytes), rt.identity.ipv6Prefix)}` };
}
