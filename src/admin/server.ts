// The admin listener: liveness, readiness and metrics for anyone who can reach it, and the
// operator API under /admin behind admin.token (auth.ts). Each endpoint is a handler under
// endpoints/; the two route tables below say which method and path reach it (router.ts).
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Runtime } from "../config/compile.js";
import type { ReloadResult } from "../gateway/reload-decision.js";
import type { Limiter } from "../limits/limiter.js";
import type { Store } from "../limits/stores/contract.js";
import type { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import type { UsageLedger } from "../usage/ledger.js";
import { requireAdminToken } from "./auth.js";
import { callerEndpoints } from "./endpoints/callers.js";
import { showConfig } from "./endpoints/config.js";
import { topDenials } from "./endpoints/denials.js";
import { limitEndpoints } from "./endpoints/limits.js";
import { metrics } from "./endpoints/metrics.js";
import { healthz, readyz } from "./endpoints/probes.js";
import { reloadConfig } from "./endpoints/reload.js";
import { usageEndpoints } from "./endpoints/usage.js";
import type { UpstreamCounts } from "./readiness.js";
import { replyProblem } from "./reply.js";
import { createRouter, type Guard, type ParameterProblem, requestPath } from "./router.js";
import { fromStoreDescribedBy } from "./store-failure.js";

/** What the admin listener reads. Its functions are called on their own, not as methods: pass arrows. */
export interface AdminDeps {
  runtime: () => Runtime;
  store: () => Store;
  /** The live limiter: its locally decided denials are flushed before a read. */
  limiter: () => Pick<Limiter, "flushDenials" | "forgetDenials">;
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
  /** Each upstream's healthy and ejected targets, for /readyz. */
  upstreams?: UpstreamCounts | undefined;
  /** Where an unexpected error of an admin request is logged in full. */
  logger?: Pick<Logger, "error">;
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

export function createAdminHandler(deps: AdminDeps) {
  const describeStoreError =
    deps.describeStoreError ??
    ((err: unknown) => new StoreErrors(storeAddress(deps.runtime().store)).describe(err));
  const fromStore = fromStoreDescribedBy(describeStoreError);
  const { runtime, store, limiter, reload, logger } = deps;
  /** What the endpoints that read or reset limit state are given. */
  const state = { runtime, store, limiter, fromStore };
  const callers = callerEndpoints(state);
  const limits = limitEndpoints(state);
  const usage = deps.usage ? usageEndpoints({ runtime, usage: deps.usage, fromStore }) : undefined;

  const operatorApi = createRouter({
    guard: requireAdminToken(() => runtime().config.admin.token),
    parameters: PARAMETERS,
    logger,
    routes: [
      { method: "GET", pattern: "/admin/callers/{caller...}", handle: callers.show },
      { method: "DELETE", pattern: "/admin/callers/{caller...}", handle: callers.reset },
      { method: "GET", pattern: "/admin/limits/{name}", handle: limits.show },
      { method: "HEAD", pattern: "/admin/limits/{name}", handle: limits.show },
      { method: "DELETE", pattern: "/admin/limits/{name}", handle: limits.reset },
      { method: "GET", pattern: "/admin/denials/top", handle: topDenials(state) },
      ...(usage
        ? [
            { method: "GET", pattern: "/admin/usage", handle: usage.list },
            { method: "HEAD", pattern: "/admin/usage", handle: usage.list },
            { method: "GET", pattern: "/admin/usage/{caller...}", handle: usage.show },
            { method: "HEAD", pattern: "/admin/usage/{caller...}", handle: usage.show },
          ]
        : []),
      { method: "GET", pattern: "/admin/config", handle: showConfig(runtime) },
      { method: "POST", pattern: "/admin/reload", handle: reloadConfig(reload), hint: "POST /admin/reload" },
    ],
  });

  const scrape = metrics(
    deps.metricsText ??
      (async () => ({
        text: await deps.metrics.registry.metrics(),
        contentType: deps.metrics.registry.contentType,
      })),
  );
  const ready = readyz({ runtime, store, describeStoreError, upstreams: deps.upstreams });
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
    const path = requestPath(req.url ?? "/");
    return path === "/admin" || path.startsWith("/admin/") ? operatorApi(req, res) : probes(req, res);
  };
}
