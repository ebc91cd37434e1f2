// The admin listener: liveness, readiness and metrics. `/admin/*` (the operator API) answers 404
// until an admin token is configured, so an unconfigured gateway exposes nothing there.
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Runtime } from "../config/compile.js";
import { formatProblem } from "../config/problems.js";
import { withDeadline } from "../deadline.js";
import type { Store } from "../limits/store.js";
import type { ReloadResult } from "../server.js";
import type { Metrics } from "./metrics.js";

export interface AdminDeps {
  runtime: () => Runtime;
  store: () => Store;
  metrics: Metrics;
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
          const text = await deps.metrics.registry.metrics();
          res.writeHead(200, { "content-type": deps.metrics.registry.contentType });
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
