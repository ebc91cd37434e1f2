// The compiled config: what every request and every operator answer reads, swapped whole by a
// reload. Its `config` member is the parsed file, whose type the config's schema owns: it is a
// parameter here (config/compile.ts binds it as `Runtime`), so the model imports nothing of it.
import type { PriceTable } from "../ai/prices.js";
import type { AlertSettings } from "../alerts/settings.js";
import type { CidrSet } from "../identity/ip.js";
import type { RouteMatcher } from "../routing/matcher.js";
import type { AdminToken } from "./admin.js";
import type { IdentitySettings, IdentityView } from "./identity.js";
import type { CompiledClient, CompiledPlan } from "./plan.js";
import type { RlsSettings } from "./rls.js";
import type { CompiledRoute, CompiledUpstream } from "./routes.js";
import type { ListenerTls } from "./tls.js";

export interface CompiledRuntime<C = unknown> extends IdentityView {
  /** The file as the schema parsed it (config/schema.ts's Config, which config/compile.ts binds). */
  readonly config: C;
  readonly file: string;
  /** The JWT key file the config names, watched and re-read with the config. */
  readonly keyFile: string | undefined;
  /** The proxy listener: its address, and the certificate it serves (watched like keyFile). */
  readonly listen: { readonly address: string; readonly tls: ListenerTls | undefined };
  readonly version: string;
  readonly loadedAt: Date;
  readonly routes: RouteMatcher<CompiledRoute>;
  readonly routeList: readonly CompiledRoute[];
  readonly upstreams: ReadonlyMap<string, CompiledUpstream>;
  readonly plans: ReadonlyMap<string, CompiledPlan>;
  readonly anonymousPlan: CompiledPlan | undefined;
  /** sha256(key) in hex → client. Plain keys are hashed here so lookups never see them. */
  readonly clientsByKeyHash: ReadonlyMap<string, CompiledClient>;
  readonly identity: IdentitySettings;
  readonly deny: { ips: CidrSet; clients: ReadonlySet<string> };
  readonly exempt: { ips: CidrSet; clients: ReadonlySet<string> };
  readonly headerStyles: { draft: boolean; ietf: boolean; legacy: boolean };
  /**
   * Some limit is a token budget (`unit: tokens`): what upstreams report debits only token
   * budgets. Without one, it debits every limit of the request (Tollgate-Cost as before).
   */
  readonly tokenBudgets: boolean;
  /** `retry_hint_max`: past this wait a 429 or 503 says x-should-retry: false. */
  readonly retryHintMaxMs: number;
  /** `models`: the prices money budgets charge; undefined: none configured. */
  readonly prices: PriceTable | undefined;
  /** Budget alerts: thresholds, webhooks, the tenants' own URLs, retries (src/alerts/settings.ts). */
  readonly alerts: AlertSettings;
  /** The operator API: the tokens it accepts (admin-tokens.ts) and how long its audit log keeps an entry. */
  readonly admin: { readonly tokens: readonly AdminToken[]; readonly auditRetentionMs: number };
  /** Envoy's rate-limit service (`rls`), its descriptor files compiled; undefined: off. */
  readonly rls: RlsSettings | undefined;
  readonly store: {
    /** The store's address as written (cluster and sentinel: a scheme naming the kind). */
    url: string;
    cluster: readonly string[] | undefined;
    sentinel: { name: string; nodes: readonly string[] } | undefined;
    prefix: string;
    timeoutMs: number;
    /** `store.replicas`: a check is answered once `wait` replicas hold its writes; undefined: off. */
    replicas: { wait: number; timeoutMs: number } | undefined;
  };
}
