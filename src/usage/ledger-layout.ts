// What one usage record writes, and where: the entry as it may be recorded (callers spelled as the
// admin API spells them, limit names that cannot break a field, a whole number of tokens), the
// two calendar periods it counts in (its month and its day in the ledger's zone, each kept until
// its end plus the retention), and the Redis layout both ledgers' readers share. Pure: no I/O.
//
// Redis layout, under the store's prefix:
// - `<prefix>{c:alice}:usage:2026-12`, `…{t:acme}:usage:2026-12-01`, `…{ip:192.0.2.1}:usage:…`:
//   one hash per caller per period, fields `<limit>\ttokens`, `<limit>\trequests` and
//   `<limit>\tusd_micros`, and a client's `tenant` (written with its index entry, so once a
//   minute at most). The hash tag is the caller's, so a caller's periods share a Redis Cluster slot.
// - `<prefix>{usage:2026-12}:client` and `…{usage:2026-12}:client:2026-12-01` (and `:tenant`):
//   the callers (or tenants) of a month and of each of its days, as sets of their labels. The
//   hash tag is the month, so the index writes of one record go to one slot.

import { type CalendarUnit, periodAt, periodId } from "../limits/calendar.js";
import { idPart } from "../limits/state-keys.js";
import { usdOf } from "../limits/units.js";
import type { UsageBy, UsageEntry, UsagePage, UsageReport, UsageTotals } from "./ledger.js";

/**
 * The most tokens one record adds. Reported units are capped far below it (1,000,000 per
 * response); this only keeps a broken caller from overflowing a 64-bit counter in Redis
 * (HINCRBY refuses past 2^63), which would then refuse every later record of that caller.
 */
export const MAX_RECORDED_TOKENS = 1_000_000_000;

/** The most micro-dollars one record adds ($1,000,000), for the same reason. */
export const MAX_RECORDED_MICROS = 1_000_000_000_000;

/** The most callers `list` returns; `listPage` walks any number. */
export const USAGE_LIST_MAX = 10_000;

/** A ledger's page walk: at most this many callers per page. */
export const USAGE_PAGE_MAX = 1000;

/** `period` is neither YYYY-MM nor YYYY-MM-DD (the admin API checks before asking). */
export class UsagePeriodError extends Error {
  constructor(period: string) {
    super(`"${period}" is not a period: write a month as YYYY-MM or a day as YYYY-MM-DD`);
    this.name = "UsagePeriodError";
  }
}

/** An admin API caller label: `client:<id>`, `tenant:<id>`, `ip:<address or prefix>`. */
const LABEL = /^(client|tenant|ip):(.{1,256})$/;

/** An IP key as identity/ip.ts writes it (`192.0.2.1`, `2001:db8::/64`): safe inside a hash tag. */
const IP_KEY = /^[0-9a-fA-F.:]{2,39}(\/\d{1,3})?$/;

/** A limit name usable as a field: no tab (the separator), no line break, bounded. */
const LIMIT_FIELD = /^[^\t\r\n]{1,128}$/;

export type LabelKind = "client" | "tenant" | "ip";

/** The kind of a caller label, or undefined when it is not one. */
export function labelKind(label: string): LabelKind | undefined {
  return LABEL.exec(label)?.[1] as LabelKind | undefined;
}

/** Which index a caller label is listed in: tenants apart, clients and IPs together. */
export function indexOf(label: string): UsageBy {
  return label.startsWith("tenant:") ? "tenant" : "client";
}

/** The hash tag of a caller label (without braces); undefined when it is not a label. */
export function callerTag(label: string): string | undefined {
  const m = LABEL.exec(label);
  if (!m) return undefined;
  const id = m[2]!;
  switch (m[1]) {
    case "client":
      return `c:${idPart(id)}`;
    case "tenant":
      return `t:${idPart(id)}`;
    default:
      // As the limits' own `{ip:…}` keys write it; anything else is escaped like an id.
      return `ip:${IP_KEY.test(id) ? id : idPart(id)}`;
  }
}

/** The hash of one caller's totals in one period (a month or a day id). */
export function usageKey(prefix: string, label: string, period: string): string | undefined {
  const tag = callerTag(label);
  return tag === undefined ? undefined : `${prefix}{${tag}}:usage:${period}`;
}

/** The month a period id belongs to: itself for a month, its first seven characters for a day. */
export function monthOf(period: string): string {
  return period.slice(0, 7);
}

/** The set of the callers (or tenants) recorded in a period. */
export function indexKey(prefix: string, by: UsageBy, period: string): string {
  const month = monthOf(period);
  return period === month ? `${prefix}{usage:${month}}:${by}` : `${prefix}{usage:${month}}:${by}:${period}`;
}

/** A client's tenant in its hash: no tab, so never read as a limit's field. */
export const TENANT_FIELD = "tenant";

export function tokensField(limit: string): string {
  return `${limit}\ttokens`;
}

export function requestsField(limit: string): string {
  return `${limit}\trequests`;
}

/** What a budget's priced requests cost, in micro-dollars (a whole number: HINCRBY). */
export function usdField(limit: string): string {
  return `${limit}\tusd_micros`;
}

/** A period a record counts in: its id and when its data may go (its end plus the retention). */
export interface RecordPeriod {
  id: string;
  expiresAtMs: number;
}

const RECORDED_UNITS: readonly CalendarUnit[] = ["month", "day"];

/** The month and the day holding `atMs` in `tz`, in that order. */
export function recordPeriods(atMs: number, tz: string, retentionMs: number): RecordPeriod[] {
  return RECORDED_UNITS.map((unit) => ({
    id: periodId(atMs, unit, tz),
    // Whole ms: PEXPIREAT refuses a fraction (a retention written as 1.0005s).
    expiresAtMs: Math.floor(periodAt(atMs, unit, tz).end + retentionMs),
  }));
}

/** An entry as it is recorded: every caller it counts for, its budget names once each, whole tokens. */
export interface Recordable {
  /** The caller's label, then its tenant's (`tenant:<id>`) when it has one. */
  labels: string[];
  limits: string[];
  tokens: number;
  /** Micro-dollars, a whole number ≥ 0 (0: not priced). */
  usdMicros: number;
  atMs: number;
  /** The caller's tenant, when the caller is a client of one. */
  tenant: string | undefined;
}

/**
 * The entry as it may be recorded, or why not. The request path builds entries from its own
 * state, so a refusal here is a bug to report, never a client's doing; tokens that are not a
 * whole number ≥ 0 are counted as 0 (the request still counts).
 */
export function recordable(entry: UsageEntry): Recordable | { error: string } {
  if (labelKind(entry.caller) === undefined)
    return { error: `the caller "${entry.caller}" is not client:<id>, tenant:<id> or ip:<address>` };
  if (!Number.isFinite(entry.atMs)) return { error: `atMs ${entry.atMs} is not an instant` };
  const labels = [entry.caller];
  let tenantId: string | undefined;
  if (entry.tenant !== undefined && entry.tenant !== "") {
    const tenant = `tenant:${entry.tenant}`;
    if (labelKind(tenant) === undefined) return { error: `the tenant "${entry.tenant}" cannot be a label` };
    if (tenant !== entry.caller) {
      labels.push(tenant);
      tenantId = entry.tenant;
    }
  }
  // The same budget named twice must not count a request twice.
  const limits = [...new Set(entry.limits)].filter((name) => LIMIT_FIELD.test(name));
  const t = entry.tokens;
  const tokens = Number.isFinite(t) && t > 0 ? Math.min(Math.floor(t), MAX_RECORDED_TOKENS) : 0;
  const u = entry.usdMicros ?? 0;
  const usdMicros = Number.isFinite(u) && u > 0 ? Math.min(Math.ceil(u), MAX_RECORDED_MICROS) : 0;
  return { labels, limits, tokens, usdMicros, atMs: entry.atMs, tenant: tenantId };
}

/** A report from a caller's hash: limits by name, sorted; fields of another shape are skipped. */
export function reportOf(
  caller: string,
  period: string,
  fields: Readonly<Record<string, string>>,
): UsageReport {
  const byLimit = new Map<string, UsageTotals>();
  for (const [field, value] of Object.entries(fields)) {
    const tab = field.lastIndexOf("\t");
    if (tab <= 0) continue;
    const kind = field.slice(tab + 1);
    if (kind !== "tokens" && kind !== "requests" && kind !== "usd_micros") continue;
    const name = field.slice(0, tab);
    let totals = byLimit.get(name);
    if (!totals) {
      totals = { tokens: 0, requests: 0 };
      byLimit.set(name, totals);
    }
    const n = Number(value);
    const count = Number.isFinite(n) && n > 0 ? n : 0;
    if (kind === "usd_micros") totals.usd = usdOf(count);
    else totals[kind] = count;
  }
  const limits: Record<string, UsageTotals> = {};
  for (const name of [...byLimit.keys()].sort()) limits[name] = byLimit.get(name)!;
  const tenant = fields[TENANT_FIELD];
  return tenant ? { caller, period, tenant, limits } : { caller, period, limits };
}

/** Every page until the last or USAGE_LIST_MAX callers, each caller once, sorted. */
export async function listAll(
  page: (cursor: string | undefined) => Promise<UsagePage>,
): Promise<UsageReport[]> {
  const seen = new Map<string, UsageReport>();
  let cursor: string | undefined;
  do {
    const got = await page(cursor);
    for (const report of got.callers) seen.set(report.caller, report);
    cursor = got.next ?? undefined;
  } while (cursor !== undefined && seen.size < USAGE_LIST_MAX);
  return [...seen.keys()]
    .sort()
    .slice(0, USAGE_LIST_MAX)
    .map((caller) => seen.get(caller)!);
}

/** An error callback that cannot make a record reject: whatever it throws is dropped. */
export function safely(onError: ((err: Error) => void) | undefined): (err: Error) => void {
  return (err) => {
    try {
      onError?.(err);
    } catch {
      // The report failed; the record must still resolve.
    }
  };
}
