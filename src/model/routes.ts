// Compiled routes and upstreams: what the proxy routes, limits and forwards by. Part of the
// compiled model (model/), built by config/compile.ts.
import type { AiSettings } from "../ai/settings.js";
import type { HeaderRules } from "../http/header-rules.js";
import type { FailurePolicy, LimitScope, PlannedLimit } from "../limits/plan.js";
import type { PathRewrite } from "../routing/rewrite.js";
import type { UsageFields } from "../usage/fields.js";
import type { UpstreamTls } from "./tls.js";

export interface CompiledUpstream {
  name: string;
  origin: string;
  /** Path prefix of the upstream URL (without trailing slash), prepended to forwarded paths. */
  basePath: string;
  host: string;
  /** The upstream's `timeout`: the deadline of its routes that do not set their own. */
  timeoutMs: number;
  /**
   * The pool's connect timeout: the longest of the upstream's `connect_timeout` and its routes'
   * (0: none), so that no route waits less than it asked for. A route whose own is shorter
   * enforces it per request (CompiledRoute.connectWaitMs): one pool per upstream keeps one set of
   * connections, one `connections` cap and one view of the upstream's health for all its routes.
   */
  connectTimeoutMs: number;
  connections: number;
  /**
   * `caller_share` as a count: the requests one caller may have in flight to this upstream on
   * this instance (at least 1), whatever its limits allow (proxy/caller-share.ts).
   */
  callerShare: number;
  /** Pooled connections of all its targets together. */
  capacity: number;
  /**
   * Where requests go, balanced by weight (`targets`, or the one `url`). `origin` and `host`
   * above are the first target's; `basePath` is every target's (checks.ts).
   */
  targets: readonly CompiledTarget[];
  /** Active health checks (`health`); undefined: only what requests see (upstream/health.ts). */
  health: { path: string; intervalMs: number; timeoutMs: number } | undefined;
  /** `retries`: attempts on other targets for requests safe to repeat (routes may override it). */
  retries: number;
  /**
   * TLS to https targets (CA, client certificate, SNI, verification), read by the loader;
   * undefined: Node's defaults (system CAs, the target's host, verified). Plain data.
   */
  tls: UpstreamTls | undefined;
  /**
   * Identity of the upstream's targets, weights, health checks and pool settings: a reload keeps
   * the upstream's balancer and health only if this is unchanged (and each target's pool and
   * health when its `key` is).
   */
  poolKey: string;
}

export interface CompiledTarget {
  /** scheme://host:port */
  origin: string;
  /** host:port, sent as the Host header to this target. */
  host: string;
  weight: number;
  /** Identity of its connection pool's settings. */
  key: string;
}

export interface CompiledRoute {
  name: string;
  matchPrefix: string;
  methods: ReadonlySet<string> | null;
  /** match.host as routing/host.ts spells it (`api.example.com`, `*.example.com`); null: every host. */
  host: string | null;
  upstream: CompiledUpstream;
  /** `retries`, else its upstream's: attempts on other targets for requests safe to repeat. */
  retries: number;
  /** `routes[].by`: how the plans' limits of this route are keyed unless their own `by` says. */
  by: LimitScope;
  /** `routes[].limits`, named `<route>.<name>`: every caller's, whatever its plan. */
  limits: readonly PlannedLimit[];
  /**
   * Header and query parameter names some limit of this route may key by: a request that
   * carries one of them twice is refused (admit.ts), since which copy an upstream reads is its
   * own choice.
   */
  keyedHeaders: readonly string[];
  keyedQuery: readonly string[];
  /** `trusted_headers`, lower-case: refused from a peer that is not a trusted proxy (admit.ts). */
  trustedHeaders: readonly string[];
  cost: number;
  onFailure: FailurePolicy;
  /** Largest request body in bytes (max_body); undefined: no cap. */
  maxBody: number | undefined;
  /** Remove the credential the caller was identified by before the upstream (Kong's name). */
  hideCredentials: boolean;
  /** Deadline of the whole upstream exchange (route `timeout`, else the upstream's); 0: none. */
  timeoutMs: number;
  /** The route's `connect_timeout`, else the upstream's (0: none): what its failures report. */
  connectTimeoutMs: number;
  /**
   * connectTimeoutMs when it is shorter than the pool's, which then does not bound it: timed
   * per request from dispatch to its connection (proxy/exchange-deadline.ts). Undefined: the
   * pool's connect timeout is the route's.
   */
  connectWaitMs: number | undefined;
  /** strip_prefix / rewrite (routing/rewrite.ts); null: the normalised path is sent as it is. */
  rewrite: PathRewrite | null;
  /** `max_cost`: what a token budget must have left to admit a request; undefined: cost. */
  maxCost: number | undefined;
  /** Where the upstream reports what a request cost (`charge`, `usage_fields`). */
  charge: RouteCharge;
  /** `ai`: the route reads its JSON request body to reserve and settle budgets; undefined: not. */
  ai: AiSettings | undefined;
  /** `request_headers` and `response_headers`, its own over its upstream's per name. */
  requestHeaders: HeaderRules;
  responseHeaders: HeaderRules;
}

export type { AiSettings as CompiledAi } from "../ai/settings.js";

/** Route `charge`: the Tollgate-Cost header (head or trailers), usage in the body, or both. */
export interface RouteCharge {
  header: boolean;
  /** The usage fields to read from a JSON body or an event stream; null: not read. */
  usage: UsageFields | null;
}
