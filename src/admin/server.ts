// The admin listener: liveness, readiness and metrics. `/admin/*` (the operator API) answers 404
// until an admin token is configured, so an unconfigured gateway exposes nothing there.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Runtime } from "../config/compile.js";
import { formatProblem } from "../config/problems.js";
import { withDeadline } from "../deadline.js";
import { type Limiter, lastHourTopKeys } from "../limits/limiter.js";
import { quota } from "../limits/spec.js";
import type { Store } from "../limits/store.js";
import type { ReloadResult } from "../server.js";
import { callerLimits, parseCallerRef } from "./callers.js";
import type { Metrics } from "./metrics.js";

export interface AdminDeps {
  runtime: () => Runtime;
  store: () => Store;
  /** The live limiter: its locally decided denials are flushed before a read. */
  limiter: () => Pick<Limiter, "flushDenials" | "forgetDenials">;
  metrics: Metrics;
  /** The /metrics text; default: `metrics.registry` (a primary aggregates its workers'). */
  metricsText?: () => Promise<{ text: string; contentType: string }>;
  reload: () => Promise<ReloadResult>;
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

/** Ready when a config is loaded and the store answers, or when no route fails closed anyway. */
export async function readiness(rt: Runtime, store: Store): Promise<Readiness> {
  const failsClosed = rt.routeList.some((r) => r.onFailure === "closed");
  try {
    const ms = Math.max(rt.store.timeoutMs, 250);
    await withDeadline(store.ping(), ms, () => new Error(`no answer within ${ms} ms`));
    return { ready: true };
  } catch (err) {
    const reason = `the limit store does not answer: ${(err as Error).message}`;
    return failsClosed ? { ready: false, reason } : { ready: true, reason: `${reason} (routes fail open)` };
  }
}

function problem(
  res: ServerResponse,
  status: number,
  title: string,
  detail: string,
  extra: Record<string, unknown> = {},
): void {
  sendJson(res, status, { type: "about:blank", title, status, detail, ...extra }, "application/problem+json");
}

/** Answers 405 with Allow unless the method is one of `methods`. */
function allow(req: IncomingMessage, res: ServerResponse, ...methods: string[]): boolean {
  if (methods.includes(req.method ?? "")) return true;
  res.setHeader("allow", methods.join(", "));
  problem(res, 405, "Method Not Allowed", `use ${methods.join(" or ")}`);
  return false;
}

/** What /admin/config shows: the shape of the config, never its secrets. */
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
      max_body: r.maxBody ?? null,
    })),
    plans: rt.config.plans,
    clients: rt.config.clients.map((c) => ({ id: c.id, plan: c.plan, tenant: c.tenant ?? null })),
    identity: {
      api_key_header: rt.identity.header,
      jwt: rt.identity.jwt ? { algorithms: rt.identity.jwt.algorithms } : null,
      trusted_proxies: rt.config.identity.trusted_proxies,
    },
    store: { kind: rt.store.url.split(":")[0], prefix: rt.store.prefix, timeout_ms: rt.store.timeoutMs },
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

function sendJson(res: ServerResponse, status: number, body: unknown, type = "application/json"): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    "content-type": type,
    "content-length": Buffer.byteLength(text),
    "cache-control": "no-store",
  });
  res.end(text);
}

export function createAdminHandler(deps: AdminDeps) {
  /** `/admin/*`: 404 unless a token is configured, then `Authorization: Bearer <token>`. */
  async function handleOperatorApi(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
    const token = deps.runtime().config.admin.token;
    if (token === "") {
      problem(res, 404, "Not Found", "the admin API is disabled: set admin.token to enable it");
      return;
    }
    if (!adminAuthorized(req.headers.authorization, token)) {
      res.setHeader("www-authenticate", 'Bearer realm="tollgate-admin"');
      problem(res, 401, "Unauthorized", "send Authorization: Bearer <admin.token>");
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
          400,
          "Bad Request",
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
      await deps.limiter().flushDenials();
      const top = await deps.store().topDenials(lastHourTopKeys(rt.store.prefix, Date.now()), n);
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
        problem(res, 405, "Method Not Allowed", "use POST /admin/reload");
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
        problem(res, 400, "Bad Request", "the config file was refused; the previous config keeps serving", {
          errors: result.problems.map(formatProblem),
        });
      }
      return;
    }
    problem(res, 404, "Not Found", `no admin endpoint ${path}`);
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
      problem(res, 400, "Bad Request", "name the caller as client:<id>, tenant:<id> or ip:<address>");
      return;
    }
    const rt = deps.runtime();
    const found = callerLimits(rt, ref, {
      plan: query.get("plan") ?? undefined,
      tenant: query.get("tenant") ?? undefined,
    });
    if (!found.ok) {
      problem(res, found.status, found.status === 404 ? "Not Found" : "Bad Request", found.detail);
      return;
    }
    const { checks, logKey, plan, tenant } = found.limits;
    const store = deps.store();
    await deps.limiter().flushDenials();
    if (req.method === "DELETE") {
      const keys = checks.map((c) => c.key);
      if (logKey) keys.push(logKey);
      deps.limiter().forgetDenials(keys);
      const deleted = await store.reset(keys);
      sendJson(res, 200, { caller: name, reset: true, keys_deleted: deleted });
      return;
    }
    const [views, denials] = await Promise.all([
      store.peek(checks),
      logKey ? store.denials(logKey) : Promise.resolve([]),
    ]);
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
        problem(res, 405, "Method Not Allowed", "use GET");
        return;
      }
      switch (path) {
        case "/healthz":
          sendJson(res, 200, { status: "ok" });
          return;
        case "/readyz": {
          const rt = deps.runtime();
          const r = await readiness(rt, deps.store());
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
          problem(res, 404, "Not Found", `no admin endpoint ${path}`);
      }
    } catch (err) {
      if (!res.headersSent)
        sendJson(
          res,
          500,
          {
            type: "about:blank",
            title: "Internal Server Error",
            status: 500,
            detail: (err as Error).message,
          },
          "application/problem+json",
        );
      else res.destroy();
    }
  };
}
