// GET /admin/usage/export?period=2026-12&format=csv|jsonl[&by=client|tenant]: every caller's
// usage of a month or a day, one row per caller and budget (usage/export-rows.ts), streamed as the
// ledger's pages arrive (USAGE_EXPORT_PAGE callers at a time), so a million callers cost the
// gateway one page of memory and the client's own pace: a page is asked for only once the last
// one was taken by the socket.
//
// A store that fails before the first row is a 503 problem like any admin read. Once rows went
// out, a failure cannot be a status any more: the response is cut (no final chunk), so a client
// sees a broken transfer, never a complete-looking file with callers missing. Callers are listed
// once each: the ledger's index sets only grow within a period, and SSCAN repeats members only
// while a set shrinks; a page never repeats one either.
import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Runtime } from "../../config/compile.js";
import { parsePeriod, periodId } from "../../limits/calendar.js";
import {
  CSV_HEADER,
  EXPORT_CONTENT_TYPES,
  EXPORT_FORMATS,
  type ExportFormat,
  exportRows,
} from "../../usage/export-rows.js";
import type { UsageBy, UsageLedger, UsagePage } from "../../usage/ledger.js";
import { replyProblem } from "../reply.js";
import type { AdminHandler } from "../router.js";
import type { FromStore } from "../store-failure.js";
import { usageZone } from "./usage.js";

/** Callers per ledger page: a few hundred KB of rows at most. */
export const USAGE_EXPORT_PAGE = 500;

/**
 * Exports one instance streams at once. Each reads the store at its client's pace and holds a
 * page: more at once would take the store from the limiter (measured: 20 concurrent exports
 * turned checks into 503s) and hold a page each for every stalled reader.
 */
export const MAX_CONCURRENT_EXPORTS = 2;

/** How long an export waits for a client that reads nothing before it ends the response. */
export const EXPORT_IDLE_MS = 30_000;

/** The query parameters an export takes: any other, or one given twice, is refused. */
const EXPORT_PARAMS = new Set(["period", "format", "by"]);

export interface UsageExportDeps {
  runtime: () => Runtime;
  usage: () => Pick<UsageLedger, "listPage">;
  fromStore: FromStore;
  logger?: Pick<Logger, "warn"> | undefined;
  now?: () => number;
  /** Exports served at once (default MAX_CONCURRENT_EXPORTS). */
  maxConcurrent?: number;
  /** How long a client may read nothing (default EXPORT_IDLE_MS). */
  idleMs?: number;
}

export function usageExport(deps: UsageExportDeps): AdminHandler {
  const now = deps.now ?? Date.now;
  let running = 0;
  return async ({ req, res, query }) => {
    const unread = queryProblem(query);
    if (unread) {
      replyProblem(res, "bad_usage_query", unread);
      return;
    }
    if (running >= (deps.maxConcurrent ?? MAX_CONCURRENT_EXPORTS)) {
      replyProblem(
        res,
        "exports_busy",
        `this instance is already streaming ${running} usage exports, the most it serves at once; ask again once one ends`,
        undefined,
        { "retry-after": "5" },
      );
      return;
    }
    running++;
    try {
      await serve(req, res, query);
    } finally {
      running--;
    }
  };

  async function serve(req: IncomingMessage, res: ServerResponse, query: URLSearchParams): Promise<void> {
    const rt = deps.runtime();
    const tz = usageZone(rt);
    const periodText = query.get("period");
    const period = periodText ?? periodId(now(), "month", tz);
    if (parsePeriod(period, tz) === null) {
      replyProblem(
        res,
        "bad_usage_query",
        `period "${period}" is neither a month nor a day: write ?period=YYYY-MM (2026-12) or ?period=YYYY-MM-DD (2026-12-01)`,
      );
      return;
    }
    const format = (query.get("format") ?? "csv") as ExportFormat;
    if (!EXPORT_FORMATS.includes(format)) {
      replyProblem(
        res,
        "bad_usage_query",
        `format "${format}" is not csv or jsonl: write ?format=csv or ?format=jsonl`,
      );
      return;
    }
    const by = query.get("by") ?? "client";
    if (by !== "client" && by !== "tenant") {
      replyProblem(
        res,
        "bad_usage_query",
        `by "${by}" is not client or tenant: write ?by=client or ?by=tenant`,
      );
      return;
    }
    const ledger = deps.usage();
    const pageAt = (cursor: string | undefined) =>
      ledger.listPage(period, by as UsageBy, { cursor, limit: USAGE_EXPORT_PAGE });
    // The first page before the head: a store that cannot answer is a 503, not a cut file.
    let page: UsagePage = await deps.fromStore(() => pageAt(undefined));
    res.writeHead(200, {
      "content-type": EXPORT_CONTENT_TYPES[format],
      "content-disposition": `attachment; filename="usage-${period}${by === "tenant" ? "-tenants" : ""}.${format}"`,
      "cache-control": "no-store",
    });
    if (req.method === "HEAD") {
      res.end();
      return;
    }
    let rows = 0;
    try {
      if (format === "csv" && !(await write(res, CSV_HEADER))) return;
      for (;;) {
        let chunk = "";
        for (const report of page.callers) {
          const text = exportRows(report, format);
          if (text) rows += Object.keys(report.limits).length;
          chunk += text;
        }
        if (chunk && !(await write(res, chunk))) return;
        if (page.next === null) break;
        page = await pageAt(page.next);
      }
      res.end();
    } catch (err) {
      deps.logger?.warn(
        { period, format, by, rows_sent: rows, err: { message: (err as Error).message } },
        "usage export cut short: the store failed after rows were sent; the response is cut, ask again",
      );
      res.destroy();
    }
  }

  /** Writes `text`, waiting while the socket is full; false once the client has gone or stalled. */
  async function write(res: ServerResponse, text: string): Promise<boolean> {
    if (res.destroyed) return false;
    if (res.write(text)) return true;
    const idleMs = deps.idleMs ?? EXPORT_IDLE_MS;
    let timer: NodeJS.Timeout | undefined;
    const stalled = new Promise<"stalled">((resolve) => {
      timer = setTimeout(() => resolve("stalled"), idleMs);
    });
    const outcome = await Promise.race([once(res, "drain"), once(res, "close"), stalled]);
    clearTimeout(timer);
    if (outcome === "stalled") {
      deps.logger?.warn(
        { idle_ms: idleMs },
        "usage export ended: its client read nothing for too long; the response is cut",
      );
      res.destroy();
    }
    return !res.destroyed;
  }
}

/** Why the query is not one an export reads (a parameter it does not take, or one twice). */
function queryProblem(query: URLSearchParams): string | undefined {
  const seen = new Set<string>();
  for (const key of query.keys()) {
    if (!EXPORT_PARAMS.has(key))
      return `the export takes period, format and by, not "${key}": remove it (a misspelt parameter would export another period or format than asked)`;
    if (seen.has(key)) return `${key} is given more than once: give it once`;
    seen.add(key);
  }
  return undefined;
}
