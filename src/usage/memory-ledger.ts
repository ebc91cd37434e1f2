// The usage ledger of a `memory://` store: the same totals as the Redis ledger, per caller label
// and per period (month and day in the ledger's zone), held in this process. Bounded twice: a
// period is let go once its end plus the retention has passed (checked on every read, swept at
// most every SWEEP_INTERVAL_MS on records), and at most `maxTotals` caller-periods are held; past
// that a new caller's record is dropped (reported through onError) while callers already held
// keep counting, so a flood of new callers cannot take memory or rewrite others' totals.
import { parsePeriod } from "../limits/calendar.js";
import { usdOf } from "../limits/units.js";
import type {
  LedgerSettings,
  UsageBy,
  UsageEntry,
  UsageLedger,
  UsagePage,
  UsageReport,
  UsageTotals,
} from "./ledger.js";
import {
  indexOf,
  listAll,
  recordable,
  recordPeriods,
  safely,
  USAGE_PAGE_MAX,
  UsagePeriodError,
} from "./ledger-layout.js";

/**
 * Caller-periods held at most. A caller active every day of a 90-day retention holds about 95
 * (its days and months); each costs a few hundred bytes, so the default stays under ~60 MB.
 */
export const DEFAULT_MEMORY_USAGE_MAX = 200_000;

/** How often a record may sweep the periods past their retention. */
const SWEEP_INTERVAL_MS = 60_000;

/** A caller-period the ledger had no room for. */
export class UsageLedgerFullError extends Error {
  constructor(max: number) {
    super(`usage not recorded: the in-process ledger holds ${max} caller-periods, its most`);
    this.name = "UsageLedgerFullError";
  }
}

/** A budget's totals as held: micro-dollars, reported as dollars. */
interface HeldTotals {
  tokens: number;
  requests: number;
  usdMicros: number;
}

interface Period {
  expiresAtMs: number;
  /** Caller label → limit name → totals. */
  callers: Map<string, Map<string, HeldTotals>>;
  /** A client's label → its tenant, as its last record said. */
  tenants: Map<string, string>;
}

export interface MemoryLedgerOptions {
  settings: () => LedgerSettings;
  onError?: ((err: Error) => void) | undefined;
  /** Epoch ms: which periods are past their retention. */
  now?: (() => number) | undefined;
  maxTotals?: number | undefined;
}

export class MemoryLedger implements UsageLedger {
  private readonly periods = new Map<string, Period>();
  /** Caller-periods held, over all periods. */
  private held = 0;
  private nextSweepAt = 0;
  private readonly settings: () => LedgerSettings;
  private readonly onError: (err: Error) => void;
  private readonly now: () => number;
  private readonly max: number;

  constructor(options: MemoryLedgerOptions) {
    this.settings = options.settings;
    this.onError = safely(options.onError);
    this.now = options.now ?? Date.now;
    this.max = options.maxTotals ?? DEFAULT_MEMORY_USAGE_MAX;
  }

  record(entry: UsageEntry): Promise<void> {
    try {
      this.add(entry);
    } catch (err) {
      this.onError(err instanceof Error ? err : new Error(String(err)));
    }
    return Promise.resolve();
  }

  private add(entry: UsageEntry): void {
    const r = recordable(entry);
    if ("error" in r) throw new Error(`usage not recorded: ${r.error}`);
    if (r.limits.length === 0) return;
    const now = this.now();
    this.sweep(now);
    const { tz, retentionMs } = this.settings();
    for (const { id, expiresAtMs } of recordPeriods(r.atMs, tz, retentionMs)) {
      // Already past its retention: Redis would expire it at once too.
      if (expiresAtMs <= now) continue;
      let period = this.periods.get(id);
      if (!period) {
        period = { expiresAtMs, callers: new Map(), tenants: new Map() };
        this.periods.set(id, period);
      }
      // A retention changed by a reload applies to what is recorded next, as PEXPIREAT does.
      period.expiresAtMs = expiresAtMs;
      for (const label of r.labels) {
        let limits = period.callers.get(label);
        if (!limits) {
          if (this.held >= this.max) throw new UsageLedgerFullError(this.max);
          limits = new Map();
          period.callers.set(label, limits);
          this.held++;
        }
        if (label === r.labels[0] && r.tenant !== undefined) period.tenants.set(label, r.tenant);
        for (const name of r.limits) {
          const totals = limits.get(name);
          if (totals) {
            totals.tokens += r.tokens;
            totals.requests += 1;
            totals.usdMicros += r.usdMicros;
          } else limits.set(name, { tokens: r.tokens, requests: 1, usdMicros: r.usdMicros });
        }
      }
    }
  }

  /** Lets go of the periods past their retention, at most once per SWEEP_INTERVAL_MS. */
  private sweep(now: number): void {
    if (now < this.nextSweepAt) return;
    this.nextSweepAt = now + SWEEP_INTERVAL_MS;
    for (const [id, period] of this.periods) if (period.expiresAtMs <= now) this.drop(id, period);
  }

  private drop(id: string, period: Period): void {
    this.periods.delete(id);
    this.held -= period.callers.size;
  }

  /** The period's totals, or undefined when none are held (never recorded, or past retention). */
  private live(period: string): { id: string; held: Period | undefined } {
    const parsed = parsePeriod(period, this.settings().tz);
    if (!parsed) throw new UsagePeriodError(period);
    const held = this.periods.get(parsed.id);
    if (held && held.expiresAtMs <= this.now()) {
      this.drop(parsed.id, held);
      return { id: parsed.id, held: undefined };
    }
    return { id: parsed.id, held };
  }

  read(caller: string, period: string): Promise<UsageReport> {
    try {
      const { id, held } = this.live(period);
      return Promise.resolve(reportOf(caller, id, held?.callers.get(caller), held?.tenants.get(caller)));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  listPage(
    period: string,
    by: UsageBy,
    page: { cursor?: string | undefined; limit: number },
  ): Promise<UsagePage> {
    try {
      const { id, held } = this.live(period);
      const labels = [...(held?.callers.keys() ?? [])].filter((label) => indexOf(label) === by).sort();
      // The cursor is an offset into the sorted labels: a caller added meanwhile may shift it by one.
      const from = page.cursor === undefined ? 0 : Number(page.cursor);
      const start = Number.isSafeInteger(from) && from > 0 ? from : 0;
      const limit = Math.min(Math.max(1, Math.floor(page.limit)), USAGE_PAGE_MAX);
      const slice = labels.slice(start, start + limit);
      const end = start + slice.length;
      return Promise.resolve({
        callers: slice.map((label) =>
          reportOf(label, id, held?.callers.get(label), held?.tenants.get(label)),
        ),
        next: end < labels.length ? String(end) : null,
      });
    } catch (err) {
      return Promise.reject(err);
    }
  }

  list(period: string, by: UsageBy): Promise<UsageReport[]> {
    return listAll((cursor) => this.listPage(period, by, { cursor, limit: USAGE_PAGE_MAX }));
  }
}

function reportOf(
  caller: string,
  period: string,
  limits: Map<string, HeldTotals> | undefined,
  tenant: string | undefined,
): UsageReport {
  const out: Record<string, UsageTotals> = {};
  for (const name of [...(limits?.keys() ?? [])].sort()) {
    const totals = limits!.get(name)!;
    out[name] =
      totals.usdMicros > 0
        ? { tokens: totals.tokens, requests: totals.requests, usd: usdOf(totals.usdMicros) }
        : { tokens: totals.tokens, requests: totals.requests };
  }
  return tenant === undefined ? { caller, period, limits: out } : { caller, period, tenant, limits: out };
}
