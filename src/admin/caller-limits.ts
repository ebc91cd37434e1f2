// Which limits a caller named by an operator (`client:<id>`, `tenant:<id>`, `ip:<addr>`) has,
// under which keys: the same keys the limiter uses, so the admin API reads what decides.
// A limit's `by` says which of three kinds it is for the caller:
// - its own (a lone caller, tenant or ip `by`): one key, known;
// - keyed by the caller and request values (`[caller, header:x-model]`): one key per value the
//   caller sent, all under one key prefix in the caller's hash tag, found by listing the store;
// - shared (no caller, tenant or ip part: a route budget, a per-org limit): by route alone the
//   key is known; by request values it is anyone's, and /admin/limits/{name}?key=… reads it.
import type { CompiledPlan, Runtime } from "../config/compile.js";
import { planRouteLimits } from "../config/plan-routes.js";
import type { ClientConfig } from "../config/schema.js";
import type { Caller } from "../identity/caller.js";
import { callerIpKey, parseIp, unwrapMapped } from "../identity/ip.js";
import { keyTail, readsRequest } from "../limits/key-by.js";
import type { PlannedLimit } from "../limits/plan.js";
import type { LimitCheck } from "../limits/spec.js";
import { binds, denialLogKey, limitKey, requestLimitKey } from "../limits/state-keys.js";
import { answerFor, yamlClient } from "../operator-state/api-key-lookup.js";
import { checkKeySpec } from "../operator-state/api-key-spec.js";
import type { StoredKey } from "../operator-state/api-keys.js";
import { type OverrideRecord, overrideContext } from "../operator-state/override-rules.js";
import type { OverrideTable } from "../operator-state/override-table.js";
import { applicableLimits } from "./runtime-limits.js";

export type CallerRef = { kind: "client" | "tenant" | "ip"; id: string };

export function parseCallerRef(text: string): CallerRef | null {
  const m = /^(client|tenant|ip):(.{1,256})$/.exec(text);
  if (!m) return null;
  return { kind: m[1] as CallerRef["kind"], id: m[2]! };
}

/** A limit keyed by the caller and request values: its keys are those under `prefix`. */
export interface KeyedLimit {
  limit: PlannedLimit;
  prefix: string;
}

/** A limit keyed by values alone, which the caller's requests count against with everyone's. */
export interface SharedLimit {
  limit: PlannedLimit;
  /** The routes on which it binds the caller. */
  routes: string[];
  /** Keyed by route alone: one known key per route. Undefined: keyed by request values. */
  perRoute: { route: string; check: LimitCheck }[] | undefined;
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
  /**
   * Limits an operator's runtime override sizes for this caller (PUT /admin/overrides), by name:
   * `checks` and `keyed` carry the overridden size already.
   */
  runtimeOverrides: ReadonlyMap<string, OverrideRecord>;
  /** Limits keyed by the caller and request values, one prefix each. */
  keyed: KeyedLimit[];
  /** Route budgets and value-keyed limits that bind the caller (none for a tenant). */
  shared: SharedLimit[];
}

export type CallerLookup =
  | { ok: true; limits: CallerLimits }
  | { ok: false; status: 400 | 404; detail: string };

/**
 * Where the keys of a limit keyed by `caller` and request values start: requestLimitKey writes the
 * values (the tail) last, after the caller's hash tag and the limit's name, so every value gives a
 * key that starts with what is left once a tail is taken off.
 */
export function keyedPrefix(prefix: string, limit: PlannedLimit, caller: Caller): string {
  const { by } = limit;
  const key = requestLimitKey(prefix, by, limit.spec.name, caller, "", undefined);
  const tail = keyTail(by, by.tagPart, caller, "", undefined);
  if (by.tagPart === undefined || !key.endsWith(`:${tail}`))
    throw new Error(`limits/state-keys.ts no longer writes ${limit.spec.name}'s values last`);
  return key.slice(0, key.length - tail.length);
}

/** Collects one caller's limits of each kind, each key and prefix once. */
class Collector {
  private readonly checks = new Map<string, LimitCheck>();
  private readonly keyed = new Map<string, KeyedLimit>();
  private readonly shared: SharedLimit[] = [];

  constructor(private readonly prefix: string) {}

  /** A lone caller, tenant or ip limit: its one key. */
  own(caller: Caller, limit: PlannedLimit): void {
    const scope = limit.by.scope;
    if (scope === undefined) return;
    const key = limitKey(this.prefix, scope, caller, limit.spec.name);
    if (!this.checks.has(key)) this.checks.set(key, { key, spec: limit.spec, cost: 0 });
  }

  /** A limit keyed by the caller (its tag part) and request values. */
  keyedBy(caller: Caller, limit: PlannedLimit): void {
    const prefix = keyedPrefix(this.prefix, limit, caller);
    if (!this.keyed.has(prefix)) this.keyed.set(prefix, { limit, prefix });
  }

  /** Sorted by kind; `skipIp`: a client's limits keyed by its IP, which the config does not know. */
  any(caller: Caller, limit: PlannedLimit, routes: string[], skipIp: boolean): void {
    const { by } = limit;
    if (by.scope !== undefined) {
      if (!(skipIp && by.scope === "ip")) this.own(caller, limit);
    } else if (by.tagPart !== undefined) {
      if (!(skipIp && by.tagPart.kind === "ip")) this.keyedBy(caller, limit);
    } else {
      this.sharedBy(caller, limit, routes);
    }
  }

  private sharedBy(caller: Caller, limit: PlannedLimit, routes: string[]): void {
    const perRoute = readsRequest(limit.by)
      ? undefined
      : routes.map((route) => {
          const key = requestLimitKey(this.prefix, limit.by, limit.spec.name, caller, route, undefined);
          return { route, check: { key, spec: limit.spec, cost: 0 } };
        });
    this.shared.push({ limit, routes, perRoute });
  }

  get size(): number {
    return this.checks.size + this.keyed.size;
  }

  result(rest: Pick<CallerLimits, "logKey" | "plan" | "tenant" | "overridden" | "runtimeOverrides">): {
    ok: true;
    limits: CallerLimits;
  } {
    return {
      ok: true,
      limits: {
        checks: [...this.checks.values()],
        keyed: [...this.keyed.values()],
        shared: this.shared,
        ...rest,
      },
    };
  }
}

/** A client the config does not hold, as an API key stored for it serves it (admin/keys). */
export interface StoredClient {
  /** The key's plan, compiled with the key's own limits when it has some. */
  plan: CompiledPlan;
  tenant: string | undefined;
  /** Names of the limits the key's own `limits` size. */
  overridden: ReadonlySet<string>;
  /** The key whose plan this is (its id, never the key). */
  keyId: string;
}

/**
 * The clients a client's stored keys make of it (`records`: its keys, oldest first), newest key
 * first, one per distinct plan, tenant and own limits: each as a request carrying that key
 * would be served. A client's keys usually share a plan (a rotation keeps it), but keys may be
 * issued on several; its requests are then limited under each key's. Keys the running config
 * cannot serve (a reload removed their plan, or their limits no longer fit) are left out.
 */
export function storedClients(rt: Runtime, records: readonly StoredKey[]): StoredClient[] {
  const found: StoredClient[] = [];
  const seen = new Set<string>();
  for (let i = records.length - 1; i >= 0; i--) {
    const record = records[i]!;
    const answer = answerFor(record, rt);
    if (answer.kind !== "client") continue;
    const same = JSON.stringify([record.plan, record.tenant ?? null, record.limits ?? null]);
    if (seen.has(same)) continue;
    seen.add(same);
    const spec = record.limits === undefined ? undefined : checkKeySpec(rt.config, record);
    const own = spec?.ok ? spec.limits : undefined;
    found.push({
      plan: answer.client.plan,
      tenant: answer.client.tenant,
      overridden: own ? limitNames(record.plan, own) : NONE,
      keyId: record.id,
    });
  }
  return found;
}

/**
 * One caller's limits as several plans bind it (a client whose keys are on several): `first`
 * with what `more` adds, each key, keyed prefix and shared limit once. `first` names the plan.
 */
export function mergedLimits(first: CallerLimits, more: readonly CallerLimits[]): CallerLimits {
  const checks = [...first.checks];
  const keyed = [...first.keyed];
  const shared = [...first.shared];
  const overridden = new Set(first.overridden);
  const runtimeOverrides = new Map(first.runtimeOverrides);
  const keys = new Set(checks.map((c) => c.key));
  const prefixes = new Set(keyed.map((k) => k.prefix));
  const sharedNames = new Set(shared.map((x) => x.limit.spec.name));
  for (const other of more) {
    for (const c of other.checks) {
      if (keys.has(c.key)) continue;
      keys.add(c.key);
      checks.push(c);
    }
    for (const k of other.keyed) {
      if (prefixes.has(k.prefix)) continue;
      prefixes.add(k.prefix);
      keyed.push(k);
    }
    for (const x of other.shared) {
      if (sharedNames.has(x.limit.spec.name)) continue;
      sharedNames.add(x.limit.spec.name);
      shared.push(x);
    }
    for (const name of other.overridden) overridden.add(name);
    for (const [name, record] of other.runtimeOverrides)
      if (!runtimeOverrides.has(name)) runtimeOverrides.set(name, record);
  }
  return { ...first, checks, keyed, shared, overridden, runtimeOverrides };
}

/**
 * The limits of a caller. A client is looked up in the config, then in `query.stored` (the
 * client of one of its stored API keys, storedClients); a JWT caller (in neither) needs `plan` (and
 * `tenant` when it has one) from the query, since only its token says them.
 * With `overrides`, a limit an operator's runtime override sizes for the caller (or its tenant)
 * is read at that size, as the limiter checks it.
 */
export function callerLimits(
  rt: Runtime,
  ref: CallerRef,
  query: { plan?: string; tenant?: string; stored?: StoredClient | undefined } = {},
  overrides?: Pick<OverrideTable, "effective">,
): CallerLookup {
  const prefix = rt.store.prefix;
  const found = new Collector(prefix);
  const runtimeOverrides = new Map<string, OverrideRecord>();
  const context = overrideContext(rt);
  /** The limit at the size in force for `who`. */
  const sized = (who: { client: string | undefined; tenant: string | undefined }, limit: PlannedLimit) => {
    const effective = overrides?.effective(who, limit, context);
    if (!effective) return limit;
    runtimeOverrides.set(limit.spec.name, effective.record);
    return effective.limit;
  };

  if (ref.kind === "client") {
    // A client with its own limits has a plan of its own, compiled with them under the plan's
    // name (config/compile.ts): its limits are read from that plan, never from rt.plans.
    const configured = yamlClient(rt, ref.id);
    // What serves the client's requests says its plan: the config, else its stored keys; only
    // a caller neither knows (a JWT's) takes the operator's word for it.
    const stored = configured ? undefined : query.stored;
    const plan =
      configured?.plan ?? stored?.plan ?? (query.plan === undefined ? undefined : rt.plans.get(query.plan));
    if (!plan) {
      return {
        ok: false,
        status: 404,
        detail: configured
          ? `client ${ref.id} has no plan`
          : query.plan === undefined
            ? `no client "${ref.id}" in the config or in a stored API key the config can serve (for a JWT caller, add ?plan=<plan>&tenant=<tenant>)`
            : `no plan "${query.plan}"`,
      };
    }
    const tenant = configured ? configured.tenant : stored ? stored.tenant : query.tenant;
    const caller: Caller = { kind: "client", id: ref.id, plan, tenant, ipKey: "" };
    const who = { client: ref.id, tenant };
    for (const [limit, routes] of applicableLimits(rt, plan)) {
      // Keyed by whatever IP the client calls from: shown under ip:<address>.
      if (binds(limit, caller)) found.any(caller, sized(who, limit), routes, true);
    }
    return found.result({
      logKey: denialLogKey(prefix, caller),
      plan: plan.name,
      tenant,
      overridden: configured ? overriddenNames(rt, ref.id, plan.name) : (stored?.overridden ?? NONE),
      runtimeOverrides,
    });
  }

  if (ref.kind === "tenant") {
    const caller: Caller = { kind: "client", id: "", plan: undefined as never, tenant: ref.id, ipKey: "" };
    const who = { client: undefined, tenant: ref.id };
    const visit = (limit: PlannedLimit) => {
      if (limit.by.scope === "tenant") found.own(caller, sized(who, limit));
      else if (limit.by.scope === undefined && limit.by.tagPart?.kind === "tenant")
        found.keyedBy(caller, sized(who, limit));
    };
    for (const plan of rt.plans.values()) for (const limit of plan.limits) visit(limit);
    for (const route of rt.routeList) for (const limit of route.limits) visit(limit);
    if (found.size === 0) return { ok: false, status: 404, detail: "no limit is kept per tenant" };
    return found.result({
      logKey: undefined,
      plan: undefined,
      tenant: ref.id,
      overridden: NONE,
      runtimeOverrides,
    });
  }

  const bytes = parseIp(ref.id) ?? ipv6Group(ref.id, rt.identity.ipv6Prefix);
  if (!bytes) {
    return {
      ok: false,
      status: 400,
      detail: `"${ref.id}" is not an IP address, or an IPv6 /${rt.identity.ipv6Prefix} as /admin/denials/top names one`,
    };
  }
  const ipKey = callerIpKey(unwrapMapped(bytes), rt.identity.ipv6Prefix);
  const anonymous: Caller = { kind: "anonymous", plan: rt.anonymousPlan, ipKey };
  // An anonymous caller keys every caller, tenant and ip part by its address (limits/state-keys.ts).
  for (const [limit, routes] of applicableLimits(rt, rt.anonymousPlan)) {
    if (binds(limit, anonymous)) found.any(anonymous, limit, routes, false);
  }
  // Clients' limits kept per the IP they call from.
  for (const plan of rt.plans.values()) {
    for (const limit of plan.limits) {
      if (limit.by.scope === "ip") found.own(anonymous, limit);
      else if (limit.by.scope === undefined && limit.by.tagPart?.kind === "ip")
        found.keyedBy(anonymous, limit);
    }
  }
  return found.result({
    logKey: denialLogKey(prefix, anonymous),
    plan: rt.anonymousPlan?.name,
    tenant: undefined,
    overridden: NONE,
    runtimeOverrides,
  });
}

const NONE: ReadonlySet<string> = new Set();

/**
 * An IPv6 caller as its key names it (`2001:db8::/64`, the form /admin/denials/top lists): the
 * group's first address, when the prefix is the one callers are grouped by (identity.ipv6_prefix).
 */
function ipv6Group(text: string, ipv6Prefix: number): Uint8Array | null {
  const slash = text.indexOf("/");
  if (slash === -1 || text.slice(slash + 1) !== String(ipv6Prefix)) return null;
  const bytes = parseIp(text.slice(0, slash));
  return bytes?.length === 16 ? bytes : null;
}

/** The limit names a configured client's `limits` replace: `<plan>.global`, `<plan>.<route>`. */
export function overriddenNames(rt: Runtime, id: string, plan: string): ReadonlySet<string> {
  const limits = rt.config.clients.find((c) => c.id === id)?.limits;
  return limits ? limitNames(plan, limits) : NONE;
}

/** The limit names a client's own `limits` (the YAML's or a stored key's) replace in `plan`. */
function limitNames(plan: string, limits: NonNullable<ClientConfig["limits"]>): ReadonlySet<string> {
  const names = new Set(planRouteLimits(limits.routes).map((l) => `${plan}.${l.suffix}`));
  if (limits.global) names.add(`${plan}.global`);
  return names;
}
