// The library surface (SPEC §5): the limiter core, importable without the proxy.

export { compileRuntime, type Runtime } from "./config/compile.js";
export { loadConfigFile, loadConfigText } from "./config/load.js";
export { ConfigError, type ConfigProblem, formatProblem } from "./config/problems.js";
export type { Config } from "./config/schema.js";
export {
  LimitDefinitionError,
  StoreUnavailableError,
  type StoreUnavailableReason,
  TollgateError,
  type TollgateErrorCode,
  UnknownLimitError,
} from "./errors.js";
export { Gateway, type GatewayOptions } from "./gateway/gateway.js";
export {
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
  LimitCheck,
  LimitOutcome,
  LimitSpec,
  StoreDecision,
  TokenBucketSpec,
  WindowSpec,
} from "./limits/spec.js";
export type { Store } from "./limits/store.js";
export { MemoryStore, type MemoryStoreOptions } from "./limits/stores/memory.js";
export { RedisStore, type RedisStoreOptions } from "./limits/stores/redis.js";
