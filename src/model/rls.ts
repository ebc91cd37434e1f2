// Envoy's rate-limit service as compiled from envoyproxy/ratelimit's YAML (config/rls-config.ts):
// per domain a tree of descriptor entries, each node maybe carrying a limit. Plain data (maps,
// arrays, objects), so a config loaded on a worker thread crosses back whole.
import type { WindowSpec } from "../limits/spec.js";

/** The units of envoy.service.ratelimit.v3.RateLimitResponse.RateLimit.Unit, lower case. */
export type RlsUnit = "second" | "minute" | "hour" | "day" | "week" | "month" | "year";

/** A descriptor's limit: a fixed window aligned on its unit (what envoyproxy/ratelimit counts). */
export interface RlsRule {
  /** `<domain>.<key>_<value>.<key>…`, as envoyproxy/ratelimit names it (logs, the spec's name). */
  readonly fullKey: string;
  /** `rate_limit.name`: what `replaces` names. */
  readonly name: string | undefined;
  readonly unlimited: boolean;
  readonly unit: RlsUnit;
  readonly requestsPerUnit: number;
  readonly shadow: boolean;
  readonly replaces: readonly string[];
  /** The limit as tollgate's fixed_window decides it (unused when `unlimited`). */
  readonly spec: WindowSpec;
}

export interface RlsNode {
  /** By `<key>_<value>` or `<key>` alone (a default for any value), as envoyproxy/ratelimit keys them. */
  readonly children: ReadonlyMap<string, RlsNode>;
  /** Children whose `<key>_<value>` holds a `*`, in file order, split on it. */
  readonly wildcards: readonly { readonly key: string; readonly parts: readonly string[] }[];
  readonly rule: RlsRule | undefined;
  /** `share_threshold`: every value this node's wildcard matches shares one counter. */
  readonly sharedValue: string | undefined;
}

export interface RlsSettings {
  /** `rls.listen`: host:port of the gRPC listener. */
  readonly listen: string;
  /** The YAML files (`rls.config`), resolved, watched and re-read with the config. */
  readonly files: readonly string[];
  readonly domains: ReadonlyMap<string, RlsNode>;
  /** `rls.response_headers`: add RateLimit-Limit, -Remaining, -Reset to Envoy's answer. */
  readonly responseHeaders: boolean;
  /** `rls.on_failure`, else `store.on_failure`. */
  readonly onFailure: "open" | "closed" | "local";
}
