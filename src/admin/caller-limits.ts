// Which limits a caller named by an operator (`client:<id>`, `tenant:<id>`, `ip:<addr>`) has,
// under which keys: the same keys the limiter uses, so the admin API reads what decides.
import type { CompiledPlan, Runtime } from "../config/compile.js";
import type { Caller } from "../identity/caller.js";
import { callerIpKey, parseIp, unwrapMapped } from "../identity/ip.js";
import { binds, denialLogKey, limitKey } from "../limits/keys.js";
import type { PlannedLimit } from "../limits/plan.js";
import type { LimitCheck } from "../limits/spec.js";

export type CallerRef = { kind: "client" | "tenant" | "ip"; id: string };

export function parseCallerRef(text: string): CallerRef | null {
  const m = /^(client|tenant|ip):(.{1,256})$/.exec(text);
  if (!m) return null;
  return { kind: m[1] as CallerRef["kind"], id: m[2]! };
}

export interface CallerLimits {
  /** One check per distinct key, cost 0 (only ever peeked at). */
  checks: LimitCheck[];
  /** Where this caller's denials are logged (clients and IPs; a tenant has none of its own). */
  logKey: string | undefined;
  plan: string | undefined;
  tenant: string | undefined;
  /** Names of the limits the client's own `limits` size (clients[].limits), not its plan. */
  overridden: ReadonlySet<string>;
}

export type CallerLookup =
  | { ok: true; limits: CallerLimits }
  | { ok: false; status: 400 | 404; detail: string };

/**
 * The limits of a caller. A client is looked up in the config; a JWT caller (not in the config)
 * needs `plan` (and `tenant` when it has one) from the query, since only its token says them.
 */
export function callerLimits(
  rt: Runtime,
  ref: CallerRef,
  query: { plan?: string; tenant?: string } = {},
): CallerLookup {
  const prefix = rt.store.prefix;
  const checks = new Map<string, LimitCheck>();
  const add = (caller: Caller, planned: PlannedLimit, scope = planned.by.scope) => {
    // Limits keyed by request values or by route have no one key per caller.
    if (scope === undefined) return;
    const key = limitKey(prefix, scope, caller, planned.spec.name);
    if (!checks.has(key)) checks.set(key, { key, spec: planned.spec, cost: 0 });
  };
  const everyLimit = (plan: CompiledPlan, visit: (p: PlannedLimit) => void) => {
    for (const p of plan.limits) visit(p);
  };

  if (ref.kind === "client") {
    // A client with its own limits has a plan of its own, compiled with them under the plan's
    // name (config/compile.ts): its limits are read from that plan, never from rt.plans.
    const configured = [...rt.clientsByKeyHash.values()].find((c) => c.id === ref.id);
    const plan = configured?.plan ?? (query.plan === undefined ? undefined : rt.plans.get(query.plan));
    if (!plan) {
      return {
        ok: false,
        status: 404,
        detail: configured
          ? `client ${ref.id} has no plan`
          : query.plan === undefined
            ? `no client "${ref.id}" in the config (for a JWT caller, add ?plan=<plan>&tenant=<tenant>)`
            : `no plan "${query.plan}"`,
      };
    }
    const tenant = configured?.tenant ?? query.tenant;
    const caller: Caller = { kind: "client", id: ref.id, plan, tenant, ipKey: "" };
    everyLimit(plan, (p) => {
      if (p.by.scope === "ip") return; // keyed by whatever IP the client calls from
      if (!binds(p, caller)) return;
      add(caller, p);
    });
    return {
      ok: true,
      limits: {
        checks: [...checks.values()],
        logKey: denialLogKey(prefix, caller),
        plan: plan.name,
        tenant,
        overridden: configured ? overriddenNames(rt, ref.id, plan.name) : NONE,
      },
    };
  }

  if (ref.kind === "tenant") {
    const caller: Caller = { kind: "client", id: "", plan: undefined as never, tenant: ref.id, ipKey: "" };
    for (const plan of rt.plans.values()) everyLimit(plan, (p) => p.by.scope === "tenant" && add(caller, p));
    if (checks.size === 0) return { ok: false, status: 404, detail: "no plan has a tenant limit" };
    return {
      ok: true,
      limits: {
        checks: [...checks.values()],
        logKey: undefined,
        plan: undefined,
        tenant: ref.id,
        overridden: NONE,
      },
    };
  }

  const bytes = parseIp(ref.id);
  if (!bytes) return { ok: false, status: 400, detail: `"${ref.id}" is not an IP address` };
  const ipKey = callerIpKey(unwrapMapped(bytes), rt.identity.ipv6Prefix);
  const anonymous: Caller = { kind: "anonymous", plan: rt.anonymousPlan, ipKey };
  if (rt.anonymousPlan) everyLimit(rt.anonymousPlan, (p) => add(anonymous, p, "ip"));
  for (const plan of rt.plans.values()) everyLimit(plan, (p) => p.by.scope === "ip" && add(anonymous, p));
  return {
    ok: true,
    limits: {
      checks: [...checks.values()],
      logKey: denialLogKey(prefix, anonymous),
      plan: rt.anonymousPlan?.name,
      tenant: undefined,
      overridden: NONE,
    },
  };
}

const NONE: ReadonlySet<string> = new Set();

/** The limit names a configured client's `limits` replace: `<plan>.global`, `<plan>.<route>`. */
function overriddenNames(rt: Runtime, id: string, plan: string): ReadonlySet<string> {
  const limits = rt.config.clients.find((c) => c.id === id)?.limits;
  if (!limits) return NONE;
  const names = new Set(Object.keys(limits.routes).map((route) => `${plan}.${route}`));
  if (limits.global) names.add(`${plan}.global`);
  return names;
}
