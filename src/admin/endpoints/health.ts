// GET /admin/health: what the console's Health page shows in one answer. The store (its address,
// credentials never shown; whether a PING answers and how fast; each master's breaker), each
// upstream's healthy and ejected targets, the config in force (file, version, load time) and the
// last reload this instance attempted, with its problems as FILE:LINE:COLUMN.
import type { Runtime } from "../../config/compile.js";
import { formatProblem } from "../../config/problems.js";
import type { ReloadResult } from "../../config/reload-result.js";
import type { BreakerState } from "../../limits/breaker.js";
import type { Health } from "../../limits/stores/contract.js";
import { storeAddress } from "../../observability/store-errors.js";
import type { UpstreamTargetState } from "../../proxy/upstreams.js";
import { pingStore } from "../readiness.js";
import { sendJson } from "../reply.js";
import type { AdminHandler } from "../router.js";

const STATES: Record<BreakerState, string> = { 0: "closed", 1: "half-open", 2: "open" };

export interface LastReload {
  atMs: number;
  result: ReloadResult;
}

export interface HealthDeps {
  runtime: () => Runtime;
  store: () => Pick<Health, "ping"> & { breakers?: () => { shard: string; state: BreakerState }[] };
  describeStoreError: (err: unknown) => string;
  upstreams?: (() => Iterable<[string, { healthy: number; ejected: number }]>) | undefined;
  /** Every target, and why an ejected one is out (proxy/upstreams.ts). */
  upstreamTargets?: (() => UpstreamTargetState[]) | undefined;
  lastReload: () => LastReload | undefined;
}

export function health(deps: HealthDeps): AdminHandler {
  return async ({ res }) => {
    const rt = deps.runtime();
    const store = deps.store();
    const started = performance.now();
    let ping: { reachable: boolean; ping_ms?: number; error?: string };
    try {
      await pingStore(rt, store);
      ping = { reachable: true, ping_ms: Math.round((performance.now() - started) * 100) / 100 };
    } catch (err) {
      ping = { reachable: false, error: deps.describeStoreError(err) };
    }
    const last = deps.lastReload();
    const targets = deps.upstreamTargets?.() ?? [];
    sendJson(res, 200, {
      store: {
        address: storeAddress(rt.store),
        ...ping,
        breakers: (store.breakers?.() ?? []).map((b) => ({
          shard: b.shard || "store",
          state: STATES[b.state],
        })),
      },
      upstreams: [...(deps.upstreams?.() ?? [])].map(([name, c]) => ({
        name,
        healthy: c.healthy,
        ejected: c.ejected,
        targets: targets
          .filter((t) => t.upstream === name)
          .map((t) => ({
            target: t.target,
            ejected: t.ejected,
            ...(t.by ? { by: t.by } : {}),
            ...(t.reason ? { reason: t.reason } : {}),
            ...(t.sinceMs ? { since: new Date(t.sinceMs).toISOString() } : {}),
          })),
      })),
      config: { file: rt.file, version: rt.version, loaded_at: rt.loadedAt.toISOString() },
      last_reload:
        last === undefined
          ? null
          : {
              at: new Date(last.atMs).toISOString(),
              ok: last.result.ok,
              ...(last.result.ok
                ? { version: last.result.version }
                : { errors: last.result.problems.map(formatProblem) }),
            },
    });
  };
}
