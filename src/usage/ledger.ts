// The usage ledger: what each caller was charged per budget limit, per calendar month and day,
// for operators who bill from it (GET /admin/usage). Every gateway instance sharing a store
// records into the same totals, and they outlive restarts of the gateway: in Redis beside the
// limits (redis-ledger.ts), or in-process for `memory://` (memory-ledger.ts). Which one is the
// store's choice (gateway/store.ts); this file is the contract, create-ledger.ts the factory.
//
// A record is fire-and-forget from the request path: it never rejects. A failure goes to the
// `onError` the ledger was created with (the gateway counts a store's failure in
// tollgate_store_errors_total and logs it), and that request's usage is missing from the totals.

export interface UsageEntry {
  /** admin spelling: client:<id> | tenant:<id> | ip:<addr> */
  caller: string;
  /** the client's tenant, for by=tenant */
  tenant?: string;
  /** the budget limit names this request counted under */
  limits: readonly string[];
  /** units charged to token budgets for this request (0 if none) */
  tokens: number;
  /** what an AI request cost, in micro-dollars (absent: not priced) */
  usdMicros?: number;
  atMs: number;
}

export interface UsageTotals {
  tokens: number;
  requests: number;
  /** dollars, exact to the micro-dollar; present once a priced request was recorded */
  usd?: number;
}

export interface UsageReport {
  caller: string;
  period: string;
  /** A client's tenant, as its requests last said it in the period (the billing export's column). */
  tenant?: string;
  limits: Record<string, UsageTotals>;
}

export type UsageBy = "client" | "tenant";

/** One page of a period's callers, and where the next one starts (null: this was the last). */
export interface UsagePage {
  callers: UsageReport[];
  next: string | null;
}

export interface UsageLedger {
  /** Fire-and-forget from the request path; errors are counted/logged by the caller's callback, never thrown. */
  record(entry: UsageEntry): Promise<void>;
  /** period as parsePeriod accepts; a caller never recorded reads as no limits. */
  read(caller: string, period: string): Promise<UsageReport>;
  /** Every caller of the period (by=client: clients and IPs; by=tenant: tenants), up to USAGE_LIST_MAX. */
  list(period: string, by: "client" | "tenant"): Promise<UsageReport[]>;
  /**
   * About `limit` callers of the period from `cursor` (start: undefined), for a listing that
   * pages. A caller recorded during the walk may or may not be listed, and may be listed twice.
   */
  listPage(
    period: string,
    by: UsageBy,
    page: { cursor?: string | undefined; limit: number },
  ): Promise<UsagePage>;
}

/** What a ledger reads from the running config, asked at each call so a reload applies. */
export interface LedgerSettings {
  /** The store's key prefix (store.prefix). */
  prefix: string;
  /** The calendar's zone (calendar.tz): which instants a month and a day hold. */
  tz: string;
  /** How long a period's totals are kept after it ends (usage.retention), in ms. */
  retentionMs: number;
}
