// `tollgate`, the library (SPEC §5): the limiter and its stores, importable without the proxy.
// Nothing here may reach the gateway's modules: loading this entry must not load undici, pino or
// prom-client (test/unit/library-entry.test.ts and `npm run check:package` fail when it does).
// The gateway is its own entry, `tollgate/gateway` (src/gateway/index.ts).

export {
  BreakerOpenError,
  LimitDefinitionError,
  StoreConnectionError,
  StoreError,
  StoreReplyError,
  StoreTimeoutError,
  StoreUnavailableError,
  type StoreUnavailableReason,
  TollgateError,
  type TollgateErrorCode,
  UnknownLimitError,
} from "./errors.js";
export {
  type CalendarWindowString,
  type CheckOptions,
  type ConcurrencyLimit,
  type CreateLimiterOptions,
  createLimiter,
  type DenyAllLimit,
  type DurationString,
  type LeakyBucketLimit,
  type LimitDefinition,
  type Limiter,
  type LimiterDecision,
  type LimitResult,
  type RateString,
  type TokenBucketLimit,
  type TokenBucketQuotaLimit,
  type UnlimitedLimit,
  type WindowLimit,
} from "./limits/create-limiter.js";
export type {
  ConcurrencySpec,
  LeakyBucketSpec,
  LimitCheck,
  LimitOutcome,
  LimitSpec,
  StoreDecision,
  TokenBucketSpec,
  WindowSpec,
} from "./limits/spec.js";
// The contract a store of one's own implements (the limiter's CheckOptions above are another thing).
export type {
  AtOptions,
  ChargedLimit,
  CheckOptions as StoreCheckOptions,
  Denial,
  DenialBatch,
  DenialLog,
  DenialRecord,
  Health,
  Inspector,
  Lease,
  LimitStore,
  Store,
} from "./limits/stores/contract.js";
export { MemoryStore, type MemoryStoreOptions } from "./limits/stores/memory.js";
export { RedisStore, type RedisStoreOptions } from "./limits/stores/redis/store.js";
