// The overrides this instance applies, in-process: caller → limit name → override, kept current
// by overrides.ts from the store and the change feed, and read by the limiter on every request
// of a client. The request path must stay as cheap as before for callers without an override:
// with no override at all, apply() returns at once; otherwise it costs one Map lookup by client
// id (a second, by tenant, only while some tenant has an override).
//
// An override ends on time even when no message says so: expiry is checked against the clock at
// use. A caller's overridden lists are memoised per base list (one per plan and route, kept by the
// compiled runtime), so a caller with an override pays the compile once per route, then a lookup,
// until the table changes or the first of its overrides expires.
import type { Caller } from "../identity/caller.js";
import type { CallerOverrides } from "../limits/limiter.js";
import type { PlannedLimit } from "../limits/plan.js";
import {
  type OverrideContext,
  type OverrideRecord,
  type OverrideScope,
  overriddenLimit,
  overrideScopeOf,
} from "./override-rules.js";

/**
 * Most overrides one instance holds. Past it a load keeps the first ones found and PUT refuses new
 * ones: every override is an operator's act, so reaching this means something is scripting them.
 */
export const OVERRIDES_MAX = 100_000;

/** `client:<id>` or `tenant:<id>`: how the admin API, the store and the change feed name a caller. */
export function parseOverrideCaller(label: string): { kind: OverrideScope; id: string } | undefined {
  const colon = label.indexOf(":");
  const kind = label.slice(0, colon);
  const id = label.slice(colon + 1);
  if (colon <= 0 || id === "" || (kind !== "client" && kind !== "tenant")) return undefined;
  return { kind, id };
}

interface Active {
  readonly record: OverrideRecord;
  /** The override compiled against each base limit it met (null: it cannot apply to it). */
  readonly compiled: WeakMap<PlannedLimit, PlannedLimit | null>;
}

interface Memo {
  readonly list: readonly PlannedLimit[];
  readonly version: number;
  /** The tenant the list was built for (a client id's tenant may differ between credentials). */
  readonly tenant: string | undefined;
  /** The first expiry among the overrides it saw: past it, the list is built again. */
  readonly validUntilMs: number;
}

interface Entry {
  readonly limits: Map<string, Active>;
  nextExpiryMs: number;
  /** Base list (a compiled plan's list for one route) → the list with this entry's overrides. */
  readonly memo: WeakMap<readonly PlannedLimit[], Memo>;
}

/** One override as the admin API shows it: whom it sizes and its record. */
export interface OverrideEntry {
  readonly caller: string;
  readonly limit: string;
  readonly record: OverrideRecord;
}

export interface OverrideTableOptions {
  /** This instance's clock, epoch ms (overrides expire by it). */
  now?: () => number;
  max?: number;
}

export class OverrideTable {
  private readonly clients = new Map<string, Entry>();
  private readonly tenants = new Map<string, Entry>();
  private readonly now: () => number;
  private readonly max: number;
  /** Overrides held, expired ones not yet pruned included. */
  private count = 0;
  /** Bumped by every change: memoised lists of an older version are built again. */
  private version = 0;

  constructor(options: OverrideTableOptions = {}) {
    this.now = options.now ?? Date.now;
    this.max = options.max ?? OVERRIDES_MAX;
  }

  get size(): number {
    return this.count;
  }

  /** Whether one more override fits (an existing one replaced always does). */
  hasRoomFor(caller: string, limit: string): boolean {
    return this.count < this.max || this.find(caller)?.limits.has(limit) === true;
  }

  /** What a caller holds now, replacing what the table had for it (after reading the store). */
  setCaller(caller: string, records: ReadonlyMap<string, OverrideRecord>): void {
    const ref = parseOverrideCaller(caller);
    if (!ref) return;
    const map = ref.kind === "client" ? this.clients : this.tenants;
    const before = map.get(ref.id);
    if (before) this.count -= before.limits.size;
    map.delete(ref.id);
    const now = this.now();
    const limits = new Map<string, Active>();
    for (const [name, record] of records) {
      if (record.expiresAtMs <= now) continue;
      if (this.count + limits.size >= this.max && !before?.limits.has(name)) continue;
      limits.set(name, { record, compiled: new WeakMap() });
    }
    if (limits.size > 0) {
      map.set(ref.id, { limits, nextExpiryMs: firstExpiry(limits), memo: new WeakMap() });
      this.count += limits.size;
    }
    this.version++;
  }

  /** Everything, replacing the table (the first load, or after changes may have been missed). */
  replaceAll(all: ReadonlyMap<string, ReadonlyMap<string, OverrideRecord>>): void {
    this.clients.clear();
    this.tenants.clear();
    this.count = 0;
    for (const [caller, records] of all) this.setCaller(caller, records);
    this.version++;
  }

  /** The caller's override of `limit`, unless it has expired. */
  get(caller: string, limit: string): OverrideRecord | undefined {
    const record = this.find(caller)?.limits.get(limit)?.record;
    return record && record.expiresAtMs > this.now() ? record : undefined;
  }

  /** Drops what has expired (the service calls it now and then: callers that stopped calling). */
  sweep(): void {
    const now = this.now();
    for (const map of [this.clients, this.tenants])
      for (const [id, entry] of map) if (entry.nextExpiryMs <= now) this.prune(map, id, entry, now);
  }

  /** The limiter's view for one generation: its base lists overridden with `context`. */
  forRuntime(context: OverrideContext): CallerOverrides {
    return { apply: (caller, planned) => this.apply(caller, planned, context) };
  }

  /**
   * `planned` with the caller's overrides in place (same names, same keys, new sizes), or
   * `planned` itself when it has none. An anonymous caller never has one.
   */
  apply(caller: Caller, planned: readonly PlannedLimit[], context: OverrideContext): readonly PlannedLimit[] {
    if (this.count === 0 || caller.kind !== "client") return planned;
    let own = this.clients.get(caller.id);
    let shared =
      caller.tenant === undefined || this.tenants.size === 0 ? undefined : this.tenants.get(caller.tenant);
    if (own === undefined && shared === undefined) return planned;
    const now = this.now();
    const memo = (own ?? shared)!.memo.get(planned);
    if (memo && memo.version === this.version && now < memo.validUntilMs && memo.tenant === caller.tenant)
      return memo.list;
    if (own && own.nextExpiryMs <= now) own = this.prune(this.clients, caller.id, own, now);
    if (shared && shared.nextExpiryMs <= now) shared = this.prune(this.tenants, caller.tenant!, shared, now);
    if (own === undefined && shared === undefined) return planned;
    let list: PlannedLimit[] | undefined;
    for (let i = 0; i < planned.length; i++) {
      const base = planned[i]!;
      const replaced = this.overridden(base, own, shared, context);
      if (!replaced) continue;
      list ??= planned.slice();
      list[i] = replaced;
    }
    const result = list ?? planned;
    (own ?? shared)!.memo.set(planned, {
      list: result,
      version: this.version,
      tenant: caller.tenant,
      validUntilMs: Math.min(own?.nextExpiryMs ?? Infinity, shared?.nextExpiryMs ?? Infinity),
    });
    return result;
  }

  /**
   * The override in force on `base` for a caller of the admin API's view: a client (its own
   * overrides, and its tenant's on the tenant's limits) or a tenant alone (`client` undefined).
   */
  effective(
    who: { client: string | undefined; tenant: string | undefined },
    base: PlannedLimit,
    context: OverrideContext,
  ): { limit: PlannedLimit; record: OverrideRecord } | undefined {
    const scope = overrideScopeOf(base.by);
    const entry =
      scope === "client"
        ? who.client === undefined
          ? undefined
          : this.clients.get(who.client)
        : scope === "tenant" && who.tenant !== undefined
          ? this.tenants.get(who.tenant)
          : undefined;
    const active = entry?.limits.get(base.spec.name);
    if (!active || active.record.expiresAtMs <= this.now()) return undefined;
    const limit = this.compile(active, base, context);
    return limit ? { limit, record: active.record } : undefined;
  }

  private overridden(
    base: PlannedLimit,
    own: Entry | undefined,
    shared: Entry | undefined,
    context: OverrideContext,
  ): PlannedLimit | null {
    const scope = overrideScopeOf(base.by);
    const active =
      scope === "client"
        ? own?.limits.get(base.spec.name)
        : scope === "tenant"
          ? shared?.limits.get(base.spec.name)
          : undefined;
    return active ? this.compile(active, base, context) : null;
  }

  private compile(active: Active, base: PlannedLimit, context: OverrideContext): PlannedLimit | null {
    let limit = active.compiled.get(base);
    if (limit === undefined) {
      const result = overriddenLimit(base, active.record, context);
      // An override the running config cannot apply (its algorithm changed by a reload) is left
      // out; the admin API says why.
      limit = "why" in result ? null : result;
      active.compiled.set(base, limit);
    }
    return limit;
  }

  /** The entry without what expired by `now`; undefined when nothing is left of it. */
  private prune(map: Map<string, Entry>, id: string, entry: Entry, now: number): Entry | undefined {
    for (const [name, active] of entry.limits) {
      if (active.record.expiresAtMs > now) continue;
      entry.limits.delete(name);
      this.count--;
    }
    this.version++;
    if (entry.limits.size === 0) {
      map.delete(id);
      return undefined;
    }
    entry.nextExpiryMs = firstExpiry(entry.limits);
    return entry;
  }

  private find(caller: string): Entry | undefined {
    const ref = parseOverrideCaller(caller);
    if (!ref) return undefined;
    return (ref.kind === "client" ? this.clients : this.tenants).get(ref.id);
  }
}

function firstExpiry(limits: ReadonlyMap<string, Active>): number {
  let first = Infinity;
  for (const a of limits.values()) if (a.record.expiresAtMs < first) first = a.record.expiresAtMs;
  return first;
}
