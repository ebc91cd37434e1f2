// GET and DELETE /admin/callers/{caller...}: the limits of one caller (client:<id>, tenant:<id>,
// ip:<address>) as the store holds them, and its recent denials; or a reset of all of them.
// Limits kept per the caller and request values (`[caller, header:x-model]`) have a key per value
// the caller sent: those are found by listing the store under the caller's key prefix, within
// KEYED_LISTING, and shown (and reset) with the caller's own. Limits shared with other callers
// (route budgets, per-org limits) are shown, never reset here: /admin/limits/{name} resets one.
import type { Runtime } from "../../config/compile.js";
import type { Limiter } from "../../limits/limiter.js";
import type { PlannedLimit } from "../../limits/plan.js";
import type { LimitCheck } from "../../limits/spec.js";
import {
  DENIAL_LOG_MAX,
  type Denial,
  type DenialLog,
  type Inspector,
  type ListKeysBounds,
} from "../../limits/stores/contract.js";
import { yamlClient } from "../../operator-state/api-key-lookup.js";
import type { KeyStore } from "../../operator-state/api-keys.js";
import type { AuditLog } from "../../operator-state/audit.js";
import type { OverrideTable } from "../../operator-state/override-table.js";
import { audited } from "../audited.js";
import {
  type CallerLimits,
  callerLimits,
  type KeyedLimit,
  mergedLimits,
  parseCallerRef,
  type SharedLimit,
  type StoredClient,
  storedClients,
} from "../caller-limits.js";
import { keyQuery, mayLackValues } from "../limit-key.js";
import { limitFacts, limitState } from "../limit-view.js";
import { replyProblem, sendJson } from "../reply.js";
import { type ResetDeps, resetState } from "../reset-state.js";
import type { AdminHandler, AdminRequest } from "../router.js";

export interface CallerEndpointDeps extends ResetDeps {
  runtime: () => Runtime;
  store: () => Inspector & Pick<DenialLog, "denials">;
  /** The live limiter: its locally decided denials are flushed before a read or a reset. */
  limiter: () => Pick<Limiter, "flushDenials" | "forgetDenials">;
  /** Where a reset is recorded, by the token that asked for it. */
  audit: Pick<AuditLog, "write">;
  /** The runtime overrides this instance applies: a limit one sizes is shown at that size. */
  overrides?: () => Pick<OverrideTable, "effective">;
  /** The API keys issued at runtime: a client known only by them is read under their plan. */
  keys?: () => Pick<KeyStore, "list">;
}

/**
 * How much a caller's listing reads: at most this many keys shown, and this many examined (a
 * single Redis walks its keyspace for them; a cluster reads the caller's slot).
 */
export const KEYED_LISTING: ListKeysBounds = { maxKeys: 200, maxScanned: 50_000 };

/** The keys a caller was limited under by request values, as checks of their limits, limit by limit. */
async function listKeyed(
  store: Inspector,
  keyed: readonly KeyedLimit[],
): Promise<{ checks: LimitCheck[]; limits: PlannedLimit[]; complete: boolean }> {
  if (keyed.length === 0) return { checks: [], limits: [], complete: true };
  const listing = store.listKeys
    ? await store.listKeys(
        keyed.map((k) => k.prefix),
        KEYED_LISTING,
      )
    : { keys: [], complete: false };
  const checks: LimitCheck[] = [];
  const limits: PlannedLimit[] = [];
  for (const k of keyed) {
    for (const key of listing.keys.filter((found) => found.startsWith(k.prefix)).sort()) {
      checks.push({ key, spec: k.limit.spec, cost: 0 });
      limits.push(k.limit);
    }
  }
  return { checks, limits, complete: listing.complete };
}

export function callerEndpoints(deps: CallerEndpointDeps): { show: AdminHandler; reset: AdminHandler } {
  /**
   * The caller's limits, with its pending denials written (and the stored key whose plan they
   * are, for a client known only by its keys); undefined when answered already.
   */
  async function lookup({
    res,
    params,
    query,
  }: AdminRequest): Promise<{ limits: CallerLimits; stored: StoredClient[] } | undefined> {
    const ref = parseCallerRef(params.caller!);
    if (!ref) {
      replyProblem(res, "bad_caller", "name the caller as client:<id>, tenant:<id> or ip:<address>");
      return undefined;
    }
    const rt = deps.runtime();
    const keys = deps.keys;
    // A client the config does not name may hold keys issued at runtime: their plan is the one
    // its requests are limited under, so the operator need not say it (a JWT caller's must).
    // Keys on several plans limit the client under each: all of them are read (and reset).
    const stored =
      ref.kind === "client" && keys && !yamlClient(rt, ref.id)
        ? storedClients(rt, await deps.fromStore(() => keys().list(ref.id)))
        : [];
    const lookupAs = (client: StoredClient | undefined) =>
      callerLimits(
        rt,
        ref,
        { plan: query.get("plan") ?? undefined, tenant: query.get("tenant") ?? undefined, stored: client },
        deps.overrides?.(),
      );
    const found = lookupAs(stored[0]);
    if (!found.ok) {
      replyProblem(res, found.status === 404 ? "unknown_caller" : "bad_caller", found.detail);
      return undefined;
    }
    const more = stored.slice(1).flatMap((client) => {
      const other = lookupAs(client);
      return other.ok ? [other.limits] : [];
    });
    await deps.fromStore(() => deps.limiter().flushDenials());
    return { limits: more.length ? mergedLimits(found.limits, more) : found.limits, stored };
  }

  async function show(request: AdminRequest): Promise<void> {
    const found = await lookup(request);
    if (!found) return;
    const { limits, stored } = found;
    const store = deps.store();
    const { checks, logKey, plan, tenant, overridden, runtimeOverrides, keyed, shared } = limits;
    const routeBudgets = shared.flatMap((s) => s.perRoute?.map((r) => r.check) ?? []);
    const [views, denials, listed] = await deps.fromStore(() =>
      Promise.all([
        store.peek([...checks, ...routeBudgets]),
        logKey ? store.denials(logKey) : Promise.resolve([]),
        listKeyed(store, keyed),
      ]),
    );
    const keyedViews =
      listed.checks.length === 0 ? [] : await deps.fromStore(() => store.peek(listed.checks));
    // Only on a limit the client's own `limits` size, so other callers' answers keep their shape.
    // A runtime override (PUT /admin/overrides) adds why and until when; the size is already its.
    const marked = (name: string) => {
      const runtime = runtimeOverrides.get(name);
      return {
        ...(overridden.has(name) ? { override: true } : {}),
        ...(runtime
          ? {
              runtime_override: {
                reason: runtime.reason,
                set_at: new Date(runtime.setAtMs).toISOString(),
                expires_at: new Date(runtime.expiresAtMs).toISOString(),
              },
            }
          : {}),
      };
    };
    const caller = request.params.caller!;
    // What the plan includes (plans.<plan>.allow), only for a plan that says.
    const allow = plan === undefined ? undefined : deps.runtime().config.plans[plan]?.allow;
    // The route budgets were peeked after the caller's own limits, in the same call.
    let nextBudget = checks.length;
    sendJson(request.res, 200, {
      caller,
      plan: plan ?? null,
      tenant: tenant ?? null,
      // Only for a client known by its stored keys alone: which key's plan this is, and when its
      // keys are on several, each plan with its newest key (the limits are all of theirs).
      ...(stored[0] ? { plan_from_key: stored[0].keyId } : {}),
      ...(stored.length > 1 ? { key_plans: stored.map((s) => ({ key: s.keyId, plan: s.plan.name })) } : {}),
      ...(allow && (allow.routes || allow.models)
        ? {
            allow: {
              ...(allow.routes ? { routes: allow.routes } : {}),
              ...(allow.models ? { models: allow.models } : {}),
            },
          }
        : {}),
      limits: checks.map((c, i) => ({ ...limitState(c, views[i]!), ...marked(c.spec.name) })),
      // The new kinds appear only for a caller that has them, so other answers keep their shape.
      ...(keyed.length === 0
        ? {}
        : {
            keyed_limits: listed.checks.map((c, i) => ({
              ...stateWithBy(listed.limits[i]!, limitState(c, keyedViews[i]!)),
              ...marked(c.spec.name),
            })),
            keyed_limits_truncated: !listed.complete,
          }),
      ...(shared.length === 0
        ? {}
        : {
            shared_limits: shared.flatMap((s): Record<string, unknown>[] =>
              s.perRoute
                ? s.perRoute.map((r) => ({
                    ...stateWithBy(s.limit, limitState(r.check, views[nextBudget++]!)),
                    route: r.route,
                  }))
                : [sharedByValues(s, caller)],
            ),
          }),
      recent_denials: newestFirst(denials, denialCount(request.query.get("limit"))).map((d) => ({
        time: new Date(d.atMs).toISOString(),
        route: d.route,
        limits: d.limits,
      })),
    });
  }

  async function reset(request: AdminRequest): Promise<void> {
    const found = await lookup(request);
    if (!found) return;
    const { limits } = found;
    const store = deps.store();
    const listed = await deps.fromStore(() => listKeyed(store, limits.keyed));
    const keys = [...limits.checks, ...listed.checks].map((c) => c.key);
    if (limits.logKey) keys.push(limits.logKey);
    const deleted = await resetState(deps, keys);
    await audited(deps.audit, request, "DELETE /admin/callers", request.params.caller!);
    sendJson(request.res, 200, {
      caller: request.params.caller,
      reset: true,
      keys_deleted: deleted,
      // A listing cut short left keys of the caller's keyed limits standing.
      ...(limits.keyed.length === 0 ? {} : { keyed_limits_truncated: !listed.complete }),
    });
  }

  return { show, reset };
}

/**
 * `?limit=N` on a caller's answer: how many recent denials it lists (1 to DENIAL_LOG_MAX, the
 * most a caller's log keeps; all of them by default).
 */
export function denialCount(limit: string | null): number {
  const n = Number(limit ?? DENIAL_LOG_MAX);
  return Number.isFinite(n) ? Math.min(Math.max(Math.trunc(n), 1), DENIAL_LOG_MAX) : DENIAL_LOG_MAX;
}

/**
 * The log's denials newest first, the first `n`. The log holds them in the order instances
 * flushed them (each once a second), so two instances' denials interleave out of time order.
 */
export function newestFirst(denials: readonly Denial[], n: number): Denial[] {
  return [...denials].sort((a, b) => b.atMs - a.atMs).slice(0, n);
}

/** A limit's state with its `by` after its name. */
function stateWithBy(limit: PlannedLimit, state: ReturnType<typeof limitState>) {
  const { name, ...rest } = state;
  return { name, by: limit.by.text, ...rest };
}

/**
 * A shared limit kept per request values: anyone's values, so no state to show here; where to
 * read one, and the value that reads this caller's requests that lacked them.
 */
function sharedByValues(shared: SharedLimit, caller: string) {
  return {
    ...limitFacts(shared.limit),
    routes: shared.routes,
    inspect: `/admin/limits/${shared.limit.spec.name}${keyQuery(shared)}`,
    ...(mayLackValues(shared.limit) ? { key_when_missing: `@${caller}` } : {}),
  };
}
