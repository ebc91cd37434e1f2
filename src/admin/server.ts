// The admin listener: liveness, readiness and metrics for anyone who can reach it, and the
// operator API under /admin behind the admin tokens and their scopes (auth.ts), every write
// audited (operator-state/audit.ts). Each endpoint is a handler under endpoints/; the two route tables
// below say which method and path reach it (router.ts).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Runtime } from "../config/compile.js";
import type { ReloadResult } from "../config/reload-result.js";
import { answeredBeforeBody } from "../http/unread-body.js";
import type { Limiter } from "../limits/limiter.js";
import type { Store } from "../limits/stores/contract.js";
import type { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import { createKeyStore, type KeyStore } from "../operator-state/api-keys.js";
import { type AuditLog, createAuditLog } from "../operator-state/audit.js";
import { MemoryChangeFeed } from "../operator-state/changes.js";
import { MemoryOverrideStore, Overrides } from "../operator-state/overrides.js";
import type { UpstreamTargetState } from "../proxy/upstreams.js";
import type { UsageLedger } from "../usage/ledger.js";
import { requireAdminToken } from "./auth.js";
import { CONSOLE_PATH, serveConsole } from "./console/routes.js";
import { ConsoleSessions } from "./console/sessions.js";
import { keyEndpoints } from "./endpoints/api-keys.js";
import { listAudit } from "./endpoints/audit.js";
import { callerEndpoints } from "./endpoints/callers.js";
import { showConfig } from "./endpoints/config.js";
import { topDenials } from "./endpoints/denials.js";
import { health, type LastReload } from "./endpoints/health.js";
import { limitEndpoints } from "./endpoints/limits.js";
import { metrics } from "./endpoints/metrics.js";
import { overrideEndpoints } from "./endpoints/overrides.js";
import { healthz, readyz } from "./endpoints/probes.js";
import { reloadConfig } from "./endpoints/reload.js";
import { usageEndpoints } from "./endpoints/usage.js";
import { usageExport } from "./endpoints/usage-export.js";
import { JSON_BODY_MAX } from "./json-body.js";
import type { KeysReadiness, UpstreamCounts } from "./readiness.js";
import { replyProblem, sendJson } from "./reply.js";
import { type AdminRoute, createRouter, type Guard, type ParameterProblem, requestPath } from "./router.js";
import { fromStoreDescribedBy } from "./store-failure.js";

/** What the admin listener reads. Its functions are called on their own, not as methods: pass arrows. */
export interface AdminDeps {
  runtime: () => Runtime;
  store: () => Store;
  /** The live limiter: its locally decided denials are flushed before a read. */
  limiter: () => Pick<Limiter, "flushDenials" | "forgetDenials">;
  /**
   * Tells every instance that limit state was reset, so each forgets the denials it cached for
   * those keys (the gateway publishes on its change feed); default: this process alone.
   */
  announceReset?: (keys: readonly string[]) => Promise<void>;
  /** The usage ledger, for /admin/usage (absent: those paths are no endpoint). */
  usage?: () => Pick<UsageLedger, "read" | "listPage">;
  metrics: Metrics;
  /** The /metrics text; default: `metrics.registry` (a primary aggregates its workers'). */
  metricsText?: () => Promise<{ text: string; contentType: string }>;
  reload: () => Promise<ReloadResult>;
  /**
   * A store failure in an operator's words (store-errors.ts); default: described from the
   * config's store address alone, without the cause of the last failed connection.
   */
  describeStoreError?: (err: unknown) => string;
  /** The callers this instance sees denied without pause (observability/sustained.ts). */
  sustained?: () => { caller: string; sinceMs: number; lastDeniedMs: number }[];
  /** Every upstream target, in rotation or not and why, for /admin/health. */
  upstreamTargets?: () => UpstreamTargetState[];
  /** Each upstream's healthy and ejected targets, for /readyz. */
  upstreams?: UpstreamCounts | undefined;
  /** The identity provider's JWT keys (identity.jwt issuer or jwks_url), for /readyz. */
  jwks?: KeysReadiness | undefined;
  /** Where an unexpected error of an admin request is logged in full (and an export cut short). */
  logger?: Pick<Logger, "error" | "warn">;
  /**
   * The audit log every write endpoint records into and GET /admin/audit reads; default: an
   * in-process ring (the gateway passes the one in the store's Redis).
   */
  audit?: AuditLog;
  /**
   * The keys issued at runtime, for /admin/keys; default: an in-process store (the gateway
   * passes the one in the store's Redis, which every instance reads).
   */
  keys?: () => KeyStore;
  /**
   * The runtime overrides, for /admin/overrides and the sizes /admin/callers shows; default: an
   * in-process store (the gateway passes the one every instance applies).
   */
  overrides?: () => Overrides;
}

/** The operator API's path parameters, and the 400 of each when its escapes are not UTF-8. */
const PARAMETERS: Record<string, ParameterProblem> = {
  caller: {
    code: "bad_caller",
    detail:
      "the caller name is not valid percent-encoded UTF-8; name the caller as client:<id>, tenant:<id> or ip:<address>",
  },
  name: {
    code: "bad_limit",
    detail:
      "the limit name is not valid percent-encoded UTF-8; name the limit as <plan>.<key> (free.global) or <route>.<name> (search.total)",
  },
  id: {
    code: "bad_key_request",
    detail:
      "the key id is not valid percent-encoded UTF-8; ids look like key_ followed by 12 letters and digits (GET /admin/keys?client=<id> lists them)",
  },
};

/**
 * Outside /admin every path is read-only: any other method is a 405 before the path is even
 * looked at, and without Allow (as the listener always answered).
 */
const getOrHeadOnly: Guard = (req, res) => {
  if (req.method === "GET" || req.method === "HEAD") return true;
  replyProblem(res, "method_not_allowed", "use GET");
  return false;
};

function describeStoreErrorOf(deps: AdminDeps): (err: unknown) => string {
  return (
    deps.describeStoreError ??
    ((err: unknown) => new StoreErrors(storeAddress(deps.runtime().store)).describe(err))
  );
}

/**
 * The operator API's route table, behind the token of auth.ts: every method but GET and HEAD
 * needs a write token, and every write endpoint records what it did in `audit`. Exported so a
 * test can walk every write endpoint, those added later included.
 */
export function operatorRoutes(deps: AdminDeps): AdminRoute[] {
  const fromStore = fromStoreDescribedBy(describeStoreErrorOf(deps));
  const { runtime, store, limiter, reload } = deps;
  const audit =
    deps.audit ??
    createAuditLog(
      { kind: "memory" },
      { settings: () => ({ prefix: runtime().store.prefix, retentionMs: runtime().admin.auditRetentionMs }) },
    );
  const inProcessOverrides = deps.overrides ? undefined : inProcessOverridesService();
  const overrides = deps.overrides ?? (() => inProcessOverrides!);
  /** What the endpoints that read or reset limit state are given. */
  const state = {
    runtime,
    store,
    limiter,
    fromStore,
    audit,
    overrides: () => overrides().table,
    announceReset: deps.announceReset,
  };
  const inProcessKeys = deps.keys
    ? undefined
    : createKeyStore({ kind: "memory", feed: new MemoryChangeFeed() });
  const keyStore = deps.keys ?? (() => inProcessKeys!);
  const callers = callerEndpoints({ ...state, keys: keyStore });
  const limits = limitEndpoints(state);
  const usage = deps.usage
    ? {
        ...usageEndpoints({ runtime, usage: deps.usage, fromStore }),
        export: usageExport({ runtime, usage: deps.usage, fromStore, logger: deps.logger }),
      }
    : undefined;
  // The last reload asked for here (the console's, the CLI's), for /admin/health.
  let lastReload: LastReload | undefined;
  const recordedReload = async () => {
    const result = await reload();
    lastReload = { atMs: Date.now(), result };
    return result;
  };
  const reloadFile = reloadConfig({ reload: recordedReload, file: () => runtime().file, audit });
  const healthView = health({
    runtime,
    store,
    describeStoreError: describeStoreErrorOf(deps),
    upstreams: deps.upstreams,
    upstreamTargets: deps.upstreamTargets,
    lastReload: () => lastReload,
  });
  const keys = keyEndpoints({ runtime, keys: keyStore, fromStore, audit });
  const overridden = overrideEndpoints({ runtime, overrides, fromStore, audit });
  return [
    { method: "GET", pattern: "/admin/callers/{caller...}", handle: callers.show },
    { method: "DELETE", pattern: "/admin/callers/{caller...}", handle: callers.reset },
    { method: "GET", pattern: "/admin/limits/{name}", handle: limits.show },
    { method: "HEAD", pattern: "/admin/limits/{name}", handle: limits.show },
    { method: "DELETE", pattern: "/admin/limits/{name}", handle: limits.reset },
    { method: "GET", pattern: "/admin/denials/top", handle: topDenials(state) },
    {
      method: "GET",
      pattern: "/admin/denials/sustained",
      // This instance's: each tracks the streaks of the denials it answers.
      handle: ({ res }) =>
        sendJson(res, 200, {
          callers: (deps.sustained?.() ?? []).map((s) => ({
            caller: s.caller,
            denied_since: new Date(s.sinceMs).toISOString(),
            last_denied: new Date(s.lastDeniedMs).toISOString(),
          })),
        }),
    },
    ...(usage
      ? [
          { method: "GET", pattern: "/admin/usage/export", handle: usage.export },
          { method: "HEAD", pattern: "/admin/usage/export", handle: usage.export },
          { method: "GET", pattern: "/admin/usage", handle: usage.list },
          { method: "HEAD", pattern: "/admin/usage", handle: usage.list },
          { method: "GET", pattern: "/admin/usage/{caller...}", handle: usage.show },
          { method: "HEAD", pattern: "/admin/usage/{caller...}", handle: usage.show },
        ]
      : []),
    { method: "GET", pattern: "/admin/config", handle: showConfig(runtime) },
    { method: "GET", pattern: "/admin/health", handle: healthView },
    { method: "HEAD", pattern: "/admin/health", handle: healthView },
    { method: "POST", pattern: "/admin/reload", handle: reloadFile, hint: "POST /admin/reload" },
    { method: "GET", pattern: "/admin/audit", handle: listAudit({ audit: () => audit, fromStore }) },
    { method: "HEAD", pattern: "/admin/audit", handle: listAudit({ audit: () => audit, fromStore }) },
    { method: "POST", pattern: "/admin/keys", handle: keys.create, hint: "POST /admin/keys" },
    { method: "GET", pattern: "/admin/keys", handle: keys.list },
    { method: "HEAD", pattern: "/admin/keys", handle: keys.list },
    { method: "DELETE", pattern: "/admin/keys/{id}", handle: keys.revoke },
    {
      method: "POST",
      pattern: "/admin/keys/{id}/rotate",
      handle: keys.rotate,
      hint: "POST /admin/keys/{id}/rotate",
    },
    { method: "GET", pattern: "/admin/overrides/{caller}", handle: overridden.list },
    { method: "HEAD", pattern: "/admin/overrides/{caller}", handle: overridden.list },
    { method: "PUT", pattern: "/admin/overrides/{caller}/{name}", handle: overridden.put },
    { method: "GET", pattern: "/admin/overrides/{caller}/{name}", handle: overridden.show },
    { method: "HEAD", pattern: "/admin/overrides/{caller}/{name}", handle: overridden.show },
    { method: "DELETE", pattern: "/admin/overrides/{caller}/{name}", handle: overridden.remove },
  ];
}

/** Overrides kept in this process, for an admin handler built without a gateway (tests). */
function inProcessOverridesService(): Overrides {
  const feed = new MemoryChangeFeed();
  return new Overrides({ store: new MemoryOverrideStore(feed), feed });
}

export function createAdminHandler(deps: AdminDeps) {
  const describeStoreError = describeStoreErrorOf(deps);
  const { runtime, store, logger } = deps;
  const sessions = new ConsoleSessions();
  const tokens = () => runtime().admin.tokens;
  const authenticated = requireAdminToken(tokens, sessions);
  const operatorApi = createRouter({
    guard: (req, res) => {
      const principal = authenticated(req, res);
      if (principal === false) return false;
      // A body announced past what any admin request may be is refused whatever the endpoint,
      // those that read no body included (a 1 MiB POST /admin/reload was answered 200).
      // Chunked bodies are judged by the endpoints that read them (json-body.ts).
      if (Number(req.headers["content-length"]) > JSON_BODY_MAX) {
        res.shouldKeepAlive = false;
        replyProblem(
          res,
          "body_too_large",
          `the request body is larger than ${JSON_BODY_MAX} bytes (an admin request is a small JSON object); send less`,
        );
        return false;
      }
      return principal;
    },
    parameters: PARAMETERS,
    logger,
    routes: operatorRoutes(deps),
  });

  const scrape = metrics(
    deps.metricsText ??
      (async () => ({
        text: await deps.metrics.registry.metrics(),
        contentType: deps.metrics.registry.contentType,
      })),
  );
  const ready = readyz({ runtime, store, describeStoreError, upstreams: deps.upstreams, jwks: deps.jwks });
  const probes = createRouter({
    guard: getOrHeadOnly,
    logger,
    routes: [
      { method: "GET", pattern: "/healthz", handle: healthz },
      { method: "HEAD", pattern: "/healthz", handle: healthz },
      { method: "GET", pattern: "/readyz", handle: ready },
      { method: "HEAD", pattern: "/readyz", handle: ready },
      { method: "GET", pattern: "/metrics", handle: scrape },
      { method: "HEAD", pattern: "/metrics", handle: scrape },
    ],
  });

  return function handleAdmin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // A request refused (401, 403, 404) or answered without reading its body: at most a short
    // body is read after the answer, as on the proxy listener (an attack pass made this one read
    // 7 GB in 15 s with no token at all). Endpoints that take a body have read it by then.
    res.once("finish", () => answeredBeforeBody(req));
    // Every admin answer is what its Content-Type says: a console session's browser never sniffs
    // a JSON or CSV answer into something it renders.
    res.setHeader("x-content-type-options", "nosniff");
    const path = requestPath(req.url ?? "/");
    // The console, where the API it drives is on (a token configured): else the API's 404.
    if ((path === CONSOLE_PATH || path.startsWith(`${CONSOLE_PATH}/`)) && tokens().length > 0)
      return serveConsole(req, res, path, { tokens, sessions }).catch((err: unknown) => {
        // A client that hung up mid-body (the sign-in's): nothing to answer. This rejection
        // was unhandled and took the whole process down, the proxy listener with it.
        if (res.headersSent || req.destroyed || req.socket.destroyed) res.destroy();
        else {
          logger?.error({ err, path }, "console request failed");
          replyProblem(
            res,
            "internal_error",
            "the console failed to handle this request; see the gateway's log",
          );
        }
      });
    return path === "/admin" || path.startsWith("/admin/") ? operatorApi(req, res) : probes(req, res);
  };
}
