// GET and DELETE /admin/callers/{caller...}: the limits of one caller (client:<id>, tenant:<id>,
// ip:<address>) as the store holds them, and its recent denials; or a reset of all of them.
import type { Runtime } from "../../config/compile.js";
import type { Limiter } from "../../limits/limiter.js";
import { quota } from "../../limits/spec.js";
import type { DenialLog, Inspector } from "../../limits/stores/contract.js";
import { type CallerLimits, callerLimits, parseCallerRef } from "../caller-limits.js";
import { replyProblem, sendJson } from "../reply.js";
import type { AdminHandler, AdminRequest } from "../router.js";
import type { FromStore } from "../store-failure.js";

export interface CallerEndpointDeps {
  runtime: () => Runtime;
  store: () => Inspector & Pick<DenialLog, "denials">;
  /** The live limiter: its locally decided denials are flushed before a read or a reset. */
  limiter: () => Pick<Limiter, "flushDenials" | "forgetDenials">;
  fromStore: FromStore;
}

export function callerEndpoints(deps: CallerEndpointDeps): { show: AdminHandler; reset: AdminHandler } {
  /** The caller's limits, with its pending denials written; undefined when answered already. */
  async function lookup({ res, params, query }: AdminRequest): Promise<CallerLimits | undefined> {
    const ref = parseCallerRef(params.caller!);
    if (!ref) {
      replyProblem(res, "bad_caller", "name the caller as client:<id>, tenant:<id> or ip:<address>");
      return undefined;
    }
    const found = callerLimits(deps.runtime(), ref, {
      plan: query.get("plan") ?? undefined,
      tenant: query.get("tenant") ?? undefined,
    });
    if (!found.ok) {
      replyProblem(res, found.status === 404 ? "unknown_caller" : "bad_caller", found.detail);
      return undefined;
    }
    await deps.fromStore(() => deps.limiter().flushDenials());
    return found.limits;
  }

  async function show(request: AdminRequest): Promise<void> {
    const limits = await lookup(request);
    if (!limits) return;
    const store = deps.store();
    const { checks, logKey, plan, tenant, overridden } = limits;
    const [views, denials] = await deps.fromStore(() =>
      Promise.all([store.peek(checks), logKey ? store.denials(logKey) : Promise.resolve([])]),
    );
    sendJson(request.res, 200, {
      caller: request.params.caller,
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
        // Only on a limit the client's own `limits` size, so other callers' answers keep their shape.
        ...(overridden.has(c.spec.name) ? { override: true } : {}),
      })),
      recent_denials: denials.map((d) => ({
        time: new Date(d.atMs).toISOString(),
        route: d.route,
        limits: d.limits,
      })),
    });
  }

  async function reset(request: AdminRequest): Promise<void> {
    const limits = await lookup(request);
    if (!limits) return;
    const store = deps.store();
    const keys = limits.checks.map((c) => c.key);
    if (limits.logKey) keys.push(limits.logKey);
    // This instance's deny cache forgets them at once; others deny until the retry-after they
    // already sent (limits/deny-cache.ts).
    deps.limiter().forgetDenials(keys);
    const deleted = await deps.fromStore(() => store.reset(keys));
    sendJson(request.res, 200, { caller: request.params.caller, reset: true, keys_deleted: deleted });
  }

  return { show, reset };
}
