// The admin listener: liveness, readiness and metrics. `/admin/*` (the operator API) answers 404
// until an admin token is configured, so an unconfigured gateway exposes nothing there.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import type { Runtime } from "../config/compile.js";
import { formatProblem } from "../config/problems.js";
import { formatDuration, type Rate } from "../config/units.js";
import { withDeadline } from "../deadline.js";
import { StoreTimeoutError } from "../errors.js";
import type { ReloadResult } from "../gateway/gateway.js";
import { type ProblemCode, problemFor, sendProblem } from "../http/problem.js";
import { requestIdOf } from "../http/request-id.js";
import { lastHourTopKeys } from "../limits/keys.js";
import type { Limiter } from "../limits/limiter.js";
import { quota } from "../limits/spec.js";
import type { Store } from "../limits/stores/contract.js";
import type { Metrics } from "../observability/metrics.js";
import { StoreErrors, storeAddress } from "../observability/store-errors.js";
import { callerLimits, parseCallerRef } from "./callers.js";

export interface AdminDeps {
  runtime: () => Runtime;
  store: () => Store;
  /** The live limiter: its locally decided denials are flushed before a read. */
  limiter: () => Pick<Limiter, "flushDenials" | "forgetDenials">;
  metrics: Metrics;
  /** The /metrics text; default: `metrics.registry` (a primary aggregates its workers'). */
  metricsText?: () => Promise<{ text: string; contentType: string }>;
  reload: () => Promise<ReloadResult>;
  /**
   * A store failure in an operator's words (store-errors.ts); default: described from the
   * config's store address alone, without the cause of the last failed connection.
   */
  describeStoreError?: (err: unknown) => string;
  /** Where an unexpected error of an admin request is logged in full. */
  logger?: Pick<Logger, "error">;
}

/**
 * Whether `authorization` carries the admin token. Both sides are hashed first so the
 * comparison takes the same time whatever the presented token's length or content.
 */
export function adminAuthorized(authorization: string | undefined, token: string): boolean {
  const presented = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? "")?.[1] ?? "";
  const a = createHash("sha256").update(presented).digest();
  const b = createHash("sha256").update(token).digest();
  return timingSafeEqual(a, b) && presented.length > 0;
}

export interface Readiness {
  ready: boolean;
  reason?: string;
}

/**
 * Ready when a config is loaded and the store answers, or when no route fails closed anyway.
 * The reason names the store's address and what is wrong (store-errors.ts).
 */
export async function readiness(
  rt: Runtime,
  store: Store,
  describe: (err: unknown) => string = (err) => new StoreErrors(storeAddress(rt.store)).describe(err),
): Promise<Readiness> {
  const failsClosed = rt.routeList.some((r) => r.onFailure === "closed");
  try {
    const ms = Math.max(rt.store.timeoutMs, 250);
    await withDeadline(store.ping(), ms, () => new StoreTimeoutError(ms));
    return { ready: true };
  } catch (err) {
    const reason = describe(err);
    return failsClosed
      ? { ready: false, reason }
      : { ready: true, reason: `${reason}; no route fails closed` };
  }
}

/** A store failure met by an admin request: answered 503 with its description. */
class AdminStoreError extends Error {}

/** A problem from the table (http/problem.ts), with the members `extra` adds after `detail`. */
function problem(
  res: ServerResponse,
  code: ProblemCode,
  detail: string,
  extra?: Record<string, unknown>,
  headers?: Record<string, string>,
): void {
  const body = problemFor(code, detail);
  if (extra) Object.assign(body, extra);
  sendProblem(res, body, headers);
}

/** Answers 405 with Allow unless the method is one of `methods`. */
function allow(req: IncomingMessage, res: ServerResponse, ...methods: string[]): boolean {
  if (methods.includes(req.method ?? "")) return true;
  res.setHeader("allow", methods.join(", "));
  problem(res, "method_not_allowed", `use ${methods.join(" or ")}`);
  return false;
}

const RATE_UNITS: Record<number, string> = { 1000: "s", 60000: "m", 3600000: "h", 86400000: "d" };

/** A parsed rate in the file's notation: `5/s`. */
export function formatRate(rate: Rate): string {
  const unit = RATE_UNITS[rate.periodMs];
  return unit ? `${rate.count}/${unit}` : `${rate.count}/${formatDuration(rate.periodMs)}`;
}

/** Bytes in the file's notation: `1mb`, `64kb`, `512b`. */
export function formatSize(bytes: number): string {
  for (const [unit, size] of [
    ["gb", 1024 ** 3],
    ["mb", 1024 ** 2],
    ["kb", 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes}b`;
}

type ParsedLimit = Runtime["config"]["plans"][string]["routes"][string];

/** A limit as the file writes it: rates as `5/s`, windows and leases as `15m`. */
function describeLimit(limit: ParsedLimit): Record<string, unknown> {
  const out: Record<string, unknown> = { ...limit };
  if (limit.rate !== undefined) out.rate = formatRate(limit.rate);
  if (limit.window !== undefined) out.window = formatDuration(limit.window);
  if (limit.lease !== undefined) out.lease = formatDuration(limit.lease);
  return out;
}

function describePlans(plans: Runtime["config"]["plans"]) {
  return Object.fromEntries(
    Object.entries(plans).map(([name, plan]) => [
      name,
      {
        ...(plan.global ? { global: describeLimit(plan.global) } : {}),
        ...(plan.tenant ? { tenant: describeLimit(plan.tenant) } : {}),
        routes: Object.fromEntries(Object.entries(plan.routes).map(([r, l]) => [r, describeLimit(l)])),
      },
    ]),
  );
}

/**
 * What /admin/config shows: the shape of the config, never its secrets. Durations, rates and
 * sizes are written as in the file (`15m`, `5/s`, `1mb`), not in the gateway's internal units.
 */
export function describeConfig(rt: Runtime) {
  return {
    version: rt.version,
    loaded_at: rt.loadedAt.toISOString(),
    file: rt.file,
    routes: rt.routeList.map((r) => ({
      name: r.name,
      path: r.matchPrefix,
      methods: r.methods ? [...r.methods] : null,
      upstream: r.upstream.name,
      by: r.by,
      cost: r.cost,
      on_failure: r.onFailure,
      max_body: r.maxBody === undefined ? null : formatSize(r.maxBody),
    })),
    plans: describePlans(rt.config.plans),
    clients: rt.config.clients.map((c) => ({ id: c.id, plan: c.plan, tenant: c.tenant ?? null })),
    identity: {
      api_key_header: rt.identity.header,
      jwt: rt.identity.jwt ? { algorithms: rt.identity.jwt.algorithms } : null,
      trusted_proxies: rt.config.identity.trusted_proxies,
    },
    store: {
      kind: rt.store.url.split(":")[0],
      address: storeAddress(rt.store),
      prefix: rt.store.prefix,
      timeout: formatDuration(rt.store.timeoutMs),
    },
  };
}

/** A percent-encoded path segment as text, or null when its escapes are not valid UTF-8. */
export function decodePathSegment(encoded: string): string | null {
  try {
    return decodeURIComponent(encoded);
  } catch {
    return null;
  }
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  res.end(text);
}

export function createAdminHandler(deps: AdminDeps) {
  const describeStoreError =
    deps.describeStoreError ??
    ((err: unknown) => new StoreErrors(storeAddress(deps.runtime().store)).describe(err));
  /** `work` (store reads and writes), its failure described for the operator. */
  const fromStore = <T>(work: () => Promise<T>): Promise<T> =>
    Promise.resolve()
      .then(work)
      .catch((err: unknown) => {
        throw new AdminStoreError(describeStoreError(err));
      });
  /** `/admin/*`: 404 unless a token is configured, then `Authorization: Bearer <token>`. */
  async function handleOperatorApi(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const token = deps.runtime().config.admin.token;
    if (token === "") {
      problem(res, "admin_disabled", "the admin API is disabled: set admin.token to enable it");
      return;
    }
    if (!adminAuthorized(req.headers.authorization, token)) {
      res.setHeader("www-authenticate", 'Bearer realm="tollgate-admin"');
      problem(res, "unauthorized", "send Authorization: Bearer <admin.token>");
      return;
    }
    const rawUrl = req.url ?? "/";
    const q = rawUrl.indexOf("?");
    // URLSearchParams never throws: a malformed escape in the query is kept as written.
    const url = { searchParams: new URLSearchParams(q === -1 ? "" : rawUrl.slice(q + 1)) };
    if (path.startsWith("/admin/callers/")) {
      const encoded = path.slice("/admin/callers/".length);
      const name = decodePathSegment(encoded);
      if (name === null) {
        problem(
          res,
          "bad_caller",
          "the caller name is not valid percent-encoded UTF-8; name the caller as client:<id>, tenant:<id> or ip:<address>",
        );
        return;
      }
      await callerEndpoint(req, res, name, url.searchParams);
      return;
    }
    if (path === "/admin/denials/top") {
      if (!allow(req, res, "GET")) return;
      const n = Math.min(Math.max(Number(url.searchParams.get("n") ?? 10) || 10, 1), 1000);
      const rt = deps.runtime();
      const top = await fromStore(async () => {
        await deps.limiter().flushDenials();
        return deps.store().topDenials(lastHourTopKeys(rt.store.prefix, Date.now()), n);
      });
      sendJson(res, 200, {
        window_seconds: 3600,
        callers: top.map((t) => ({ caller: t.caller, denials: t.count })),
      });
      return;
    }
    if (path === "/admin/config") {
      if (!allow(req, res, "GET")) return;
      sendJson(res, 200, describeConfig(deps.runtime()));
      return;
    }
    if (path === "/admin/reload") {
      if (req.method !== "POST") {
        res.setHeader("allow", "POST");
        problem(res, "method_not_allowed", "use POST /admin/reload");
        return;
      }
      const result = await deps.reload();
      if (result.ok) {
        sendJson(res, 200, {
          status: "reloaded",
          version: result.version,
          changed: result.changed,
          restart_required: result.restartRequired,
        });
      } else {
        problem(res, "config_refused", "the config file was refused; the previous config keeps serving", {
          errors: result.problems.map(formatProblem),
        });
      }
      return;
    }
    problem(res, "no_endpoint", `no admin endpoint ${path}`);
  }

  async function callerEndpoint(
    req: IncomingMessage,
    res: ServerResponse,
    name: string,
    query: URLSearchParams,
  ): Promise<void> {
    if (!allow(req, res, "GET", "DELETE")) return;
    const ref = parseCallerRef(name);
    if (!ref) {
      problem(res, "bad_caller", "name the caller as client:<id>, tenant:<id> or ip:<address>");
      return;
    }
    const rt = deps.runtime();
    const found = callerLimits(rt, ref, {
      plan: query.get("plan") ?? undefined,
      tenant: query.get("tenant") ?? undefined,
    });
    if (!found.ok) {
      problem(res, found.status === 404 ? "unknown_caller" : "bad_caller", found.detail);
      return;
    }
    const { checks, logKey, plan, tenant } = found.limits;
    const store = deps.store();
    await fromStore(() => deps.limiter().flushDenials());
    if (req.method === "DELETE") {
      const keys = checks.map((c) => c.key);
      if (logKey) keys.push(logKey);
      deps.limiter().forgetDenials(keys);
      const deleted = await fromStore(() => store.reset(keys));
      sendJson(res, 200, { caller: name, reset: true, keys_deleted: deleted });
      return;
    }
    const [views, denials] = await fromStore(() =>
      Promise.all([store.peek(checks), logKey ? store.denials(logKey) : Promise.resolve([])]),
    );
    sendJson(res, 200, {
      caller: name,
      plan: plan ?? null,
      tenant: tenant ?? null,
      limits: checks.map((c, i) => ({
        name: c.spec.name,
        algorithm: c.spec.algorithm,
        limit: quota(c.spec),
        remaining: views[i]!.remaining,
        reset_seconds: Math.ceil(views[i]!.resetMs / 1000),
        shadow: c.spec.shadow === true,
        key: c.key,
      })),
      recent_denials: denials.map((d) => ({
        time: new Date(d.atMs).toISOString(),
        route: d.route,
        limits: d.limits,
      })),
    });
  }

  return async function handleAdmin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0] ?? "/";
    try {
      if (path.startsWith("/admin/") || path === "/admin") {
        await handleOperatorApi(req, res, path);
        return;
      }
      if (req.method !== "GET" && req.method !== "HEAD") {
        problem(res, "method_not_allowed", "use GET");
        return;
      }
      switch (path) {
        case "/healthz":
          sendJson(res, 200, { status: "ok" });
          return;
        case "/readyz": {
          const rt = deps.runtime();
          const r = await readiness(rt, deps.store(), describeStoreError);
          sendJson(res, r.ready ? 200 : 503, {
            status: r.ready ? "ready" : "not ready",
            reason: r.reason,
            config_version: rt.version,
          });
          return;
        }
        case "/metrics": {
          const { text, contentType } = deps.metricsText
            ? await deps.metricsText()
            : { text: await deps.metrics.registry.metrics(), contentType: deps.metrics.registry.contentType };
          res.writeHead(200, { "content-type": contentType });
          res.end(text);
          return;
        }
        default:
          problem(res, "no_endpoint", `no admin endpoint ${path}`);
      }
    } catch (err) {
      if (res.headersSent) res.destroy();
      // The store is down or refusing: not the gateway's fault, and the detail says what to fix.
      else if (err instanceof AdminStoreError) problem(res, "store_unavailable", err.message);
      else {
        // The error's own words may name files, keys or internals: they go to the log, and the
        // answer only says which log line to read.
        const requestId = requestIdOf(req.headers);
        deps.logger?.error({ err, path, request_id: requestId }, "admin request failed");
        problem(
          res,
          "internal_error",
          `the admin API failed to handle this request; see the gateway's log for request_id ${requestId}`,
          undefined,
          { "x-request-id": requestId },
        );
      }
    }
  };
}
