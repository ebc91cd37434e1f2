// The admin listener: liveness, readiness and metrics. `/admin/*` (the operator API) answers 404
// until an admin token is configured, so an unconfigured gateway exposes nothing there.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Runtime } from "../config/compile.js";
import type { Store } from "../limits/store.js";
import type { Metrics } from "./metrics.js";

export interface AdminDeps {
  runtime: () => Runtime;
  store: () => Store;
  metrics: Metrics;
}

export interface Readiness {
  ready: boolean;
  reason?: string;
}

/** Ready when a config is loaded and the store answers, or when no route fails closed anyway. */
export async function readiness(rt: Runtime, store: Store): Promise<Readiness> {
  const failsClosed = rt.routeList.some((r) => r.onFailure === "closed");
  try {
    await withTimeout(store.ping(), Math.max(rt.store.timeoutMs, 250));
    return { ready: true };
  } catch (err) {
    const reason = `the limit store does not answer: ${(err as Error).message}`;
    return failsClosed ? { ready: false, reason } : { ready: true, reason: `${reason} (routes fail open)` };
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
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
  return async function handleAdmin(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? "/").split("?")[0];
    try {
      if (req.method !== "GET" && req.method !== "HEAD") {
        sendJson(
          res,
          405,
          { type: "about:blank", title: "Method Not Allowed", status: 405, detail: "use GET" },
          "application/problem+json",
        );
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
          sendJson(
            res,
            404,
            { type: "about:blank", title: "Not Found", status: 404, detail: `no admin endpoint ${path}` },
            "application/problem+json",
          );
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
