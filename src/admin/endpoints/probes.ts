// GET /healthz (the process runs) and GET /readyz (send it traffic, or why not): what
// orchestrators ask, without a token.
import type { Runtime } from "../../config/compile.js";
import type { Health } from "../../limits/stores/contract.js";
import { type KeysReadiness, readiness, type UpstreamCounts } from "../readiness.js";
import { sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";

export const healthz: AdminHandler = ({ res }) => sendJson(res, 200, { status: "ok" });

export interface ReadyzDeps {
  runtime: () => Runtime;
  store: () => Pick<Health, "ping">;
  describeStoreError: (err: unknown) => string;
  /** Each upstream's healthy and ejected targets; none: not reported. */
  upstreams?: UpstreamCounts | undefined;
  /** The identity provider's JWT keys; none: not reported. */
  jwks?: KeysReadiness | undefined;
}

export function readyz(deps: ReadyzDeps): AdminHandler {
  return async ({ res }) => {
    const rt = deps.runtime();
    const r = await readiness(rt, deps.store(), deps.describeStoreError, deps.upstreams, deps.jwks);
    sendJson(res, r.ready ? 200 : 503, {
      status: r.ready ? "ready" : "not ready",
      reason: r.reason,
      warning: r.warning,
      config_version: rt.version,
    });
  };
}
