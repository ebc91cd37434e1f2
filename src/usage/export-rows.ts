// The billing export's rows (GET /admin/usage/export): one per caller and budget of a period, as
// CSV (RFC 4180, a header line first) or JSON Lines. Pure: a report in, text out.
//
// Money is written from micro-dollars as a decimal with six places, never a float's digits, so a
// column sums exactly. A CSV cell that a spreadsheet would run as a formula (starting = + - @,
// a tab or a carriage return: a client id may start with `=`) is prefixed with `'`, as OWASP
// advises; JSON Lines keep every value as it is.
import type { UsageReport } from "./ledger.js";

export type ExportFormat = "csv" | "jsonl";

export const EXPORT_FORMATS: readonly ExportFormat[] = ["csv", "jsonl"];

export const CSV_HEADER = "period,tenant,caller,budget,requests,tokens,usd\r\n";

export const EXPORT_CONTENT_TYPES: Readonly<Record<ExportFormat, string>> = {
  csv: "text/csv; charset=utf-8; header=present",
  jsonl: "application/jsonl; charset=utf-8",
};

/** Dollars as a six-place decimal, exact (from whole micro-dollars). */
export function usdText(usd: number): string {
  const micros = Math.round(usd * 1_000_000);
  const sign = micros < 0 ? "-" : "";
  const abs = Math.abs(micros);
  return `${sign}${Math.floor(abs / 1_000_000)}.${String(abs % 1_000_000).padStart(6, "0")}`;
}

function csvCell(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
}

/** The text of one report's rows: a line per budget, in the report's (sorted) order. */
export function exportRows(report: UsageReport, format: ExportFormat): string {
  let out = "";
  const tenant = report.tenant ?? (report.caller.startsWith("tenant:") ? report.caller.slice(7) : undefined);
  for (const [budget, totals] of Object.entries(report.limits)) {
    if (format === "jsonl") {
      out += `${JSON.stringify({
        period: report.period,
        tenant: tenant ?? null,
        caller: report.caller,
        budget,
        requests: totals.requests,
        tokens: totals.tokens,
        usd: totals.usd === undefined ? null : Number(usdText(totals.usd)),
      })}\n`;
    } else {
      const usd = totals.usd === undefined ? "" : usdText(totals.usd);
      out += `${[report.period, tenant ?? "", report.caller, budget].map(csvCell).join(",")},${totals.requests},${totals.tokens},${usd}\r\n`;
    }
  }
  return out;
}
