// The usage ledger for a store (ledger.ts has the contract): Redis beside the limits, or this
// process for `memory://`.
import type { Cluster, Redis } from "ioredis";
import type { LedgerSettings, UsageLedger } from "./ledger.js";
import { MemoryLedger } from "./memory-ledger.js";
import { RedisLedger } from "./redis-ledger.js";

export { USAGE_LIST_MAX, USAGE_PAGE_MAX, UsagePeriodError } from "./ledger-layout.js";

/** Where the ledger keeps its totals: the store's own Redis connection, or this process. */
export type LedgerStore = { kind: "memory" } | { kind: "redis"; client: Redis | Cluster; timeoutMs: number };

export interface LedgerOptions {
  settings: () => LedgerSettings;
  /** A record that was not written, and why (a StoreError for Redis's failures). */
  onError?: (err: Error) => void;
  /** Epoch ms: which periods the memory ledger has let go. */
  now?: () => number;
}

export function createUsageLedger(store: LedgerStore, options: LedgerOptions): UsageLedger {
  return store.kind === "redis"
    ? new RedisLedger({ client: store.client, timeoutMs: store.timeoutMs, ...options })
    : new MemoryLedger(options);
}
