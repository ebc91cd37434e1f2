// One ShouldRateLimit call as values: the request's descriptors matched to limits and made into
// tollgate checks (one store call for all of them), then the store's outcomes made into Envoy's
// answer. Pure: no I/O, no clock; server.ts does the call. What is envoyproxy/ratelimit's
// behaviour and what differs is said where it happens (docs/envoy.md has the list).
import { hashed } from "../limits/key-by.js";
import type { LimitCheck, LimitOutcome, StoreDecision } from "../limits/spec.js";
import type { RlsRule, RlsSettings, RlsUnit } from "../model/rls.js";
import { type DescriptorEntry, matchDescriptor } from "./match.js";
import { windowSpecOf } from "./units.js";

export const MAX_UINT32 = 4_294_967_295;

/** What server.ts reads off the wire (proto-loader: keepCase, longs as numbers, enums as names). */
export interface RlsRequest {
  domain?: string;
  descriptors?: {
    entries?: { key?: string; value?: string }[];
    limit?: { requests_per_unit?: number; unit?: string } | null;
    hits_addend?: { value?: number } | null;
  }[];
  hits_addend?: number;
}

export interface RlsStatus {
  code: "OK" | "OVER_LIMIT";
  current_limit?: { name: string; requests_per_unit: number; unit: string };
  limit_remaining: number;
  duration_until_reset?: { seconds: number; nanos: number };
}

export interface RlsResponse {
  overall_code: "OK" | "OVER_LIMIT";
  statuses: RlsStatus[];
  response_headers_to_add: { key: string; value: string }[];
}

/** A request refused before any limit: gRPC INVALID_ARGUMENT with this message. */
export class RlsRequestError extends Error {}

/** A request's descriptors, each with the limit it is under (if any) and its check. */
export interface RlsPlan {
  /** Per descriptor: `unlimited`, `none` (no limit, or replaced), or the index of its check. */
  slots: ("unlimited" | "none" | number)[];
  rules: RlsRule[];
  checks: LimitCheck[];
}

/** Longest descriptor list and entry list a request may carry: Envoy sends a handful. */
export const MAX_DESCRIPTORS = 64;
export const MAX_ENTRIES = 32;

export function planRequest(
  settings: Pick<RlsSettings, "domains">,
  prefix: string,
  request: RlsRequest,
): RlsPlan {
  const domain = request.domain ?? "";
  if (domain === "") throw new RlsRequestError("rate limit domain must not be empty");
  const descriptors = request.descriptors ?? [];
  if (descriptors.length === 0) throw new RlsRequestError("rate limit descriptor list must not be empty");
  if (descriptors.length > MAX_DESCRIPTORS)
    throw new RlsRequestError(`at most ${MAX_DESCRIPTORS} descriptors per request`);
  const root = settings.domains.get(domain);
  const matched: ({ rule: RlsRule; values: readonly string[]; entries: DescriptorEntry[] } | undefined)[] =
    [];
  const replaced = new Set<string>();
  for (const d of descriptors) {
    const entries = (d.entries ?? []).map((e) => ({ key: e.key ?? "", value: e.value ?? "" }));
    if (entries.length > MAX_ENTRIES)
      throw new RlsRequestError(`at most ${MAX_ENTRIES} entries per descriptor`);
    // An unknown domain has no limits, a limit override included (envoyproxy/ratelimit looks
    // the domain up first).
    if (root === undefined) {
      matched.push(undefined);
      continue;
    }
    const override = overrideRule(domain, entries, d.limit);
    const m = override
      ? { rule: override, values: entries.map((e) => e.value) }
      : matchDescriptor(root, entries);
    if (m) for (const r of m.rule.replaces) replaced.add(r);
    matched.push(m ? { ...m, entries } : undefined);
  }
  const plan: RlsPlan = { slots: [], rules: [], checks: [] };
  // A key named twice in one call is one check charged both costs: the script reads each key's
  // state once, so two checks of one key were charged as one (six copies of a descriptor, or
  // two values sharing a share_threshold key, cost a single hit; found by an outside test).
  const checkOfKey = new Map<string, number>();
  const base = hitsOf(request.hits_addend);
  for (let i = 0; i < descriptors.length; i++) {
    const m = matched[i];
    if (m === undefined || (m.rule.name !== undefined && replaced.has(m.rule.name))) {
      plan.slots.push("none");
      continue;
    }
    if (m.rule.unlimited) {
      plan.slots.push("unlimited");
      continue;
    }
    // A descriptor's own hits_addend may be 0: it looks without taking (need 1: OVER_LIMIT when
    // not one more request fits). The request's 0 is "not set", and counts 1.
    const own = descriptors[i]!.hits_addend?.value;
    const hits = own === undefined || own === null ? base : hitsOf(own, 0);
    // Past the limit every cost is refused alike: capped so a uint64 never reaches the script.
    const cost = Math.min(hits, m.rule.requestsPerUnit + 1);
    const key = stateKey(prefix, domain, m.entries, m.values, m.rule.unit);
    const same = checkOfKey.get(key);
    if (same !== undefined) {
      // Both descriptors get the one outcome; the limit is the first's (the same key and unit
      // under another override's limit is the caller's contradiction, decided by the first).
      const first = plan.checks[same]!;
      const sum = Math.min(first.cost + cost, plan.rules[same]!.requestsPerUnit + 1);
      plan.checks[same] = sum === 0 ? first : { key, spec: first.spec, cost: sum };
      plan.slots.push(same);
      continue;
    }
    checkOfKey.set(key, plan.checks.length);
    plan.slots.push(plan.checks.length);
    plan.rules.push(m.rule);
    plan.checks.push(
      cost === 0 ? { key, spec: m.rule.spec, cost: 0, need: 1 } : { key, spec: m.rule.spec, cost },
    );
  }
  return plan;
}

function hitsOf(v: number | undefined, least = 1): number {
  const n = typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0;
  return Math.max(least, n);
}

const OVERRIDE_UNITS: Record<string, RlsUnit> = {
  SECOND: "second",
  MINUTE: "minute",
  HOUR: "hour",
  DAY: "day",
  MONTH: "month",
  YEAR: "year",
  WEEK: "week",
};

/** Envoy's per-descriptor `limit` (a route's override): that limit instead of the file's. */
function overrideRule(
  domain: string,
  entries: readonly DescriptorEntry[],
  limit: { requests_per_unit?: number; unit?: string } | null | undefined,
): RlsRule | undefined {
  if (!limit) return undefined;
  const unit = OVERRIDE_UNITS[limit.unit ?? ""];
  if (unit === undefined)
    throw new RlsRequestError(`descriptor limit override has no valid unit (${String(limit.unit)})`);
  const perUnit = Math.min(MAX_UINT32, Math.max(0, Math.floor(limit.requests_per_unit ?? 0)));
  const fullKey = `${domain}.${entries.map((e) => (e.value === "" ? e.key : `${e.key}_${e.value}`)).join(".")}`;
  return {
    fullKey,
    name: undefined,
    unlimited: false,
    unit,
    requestsPerUnit: perUnit,
    shadow: false,
    replaces: [],
    spec: windowSpecOf(fullKey, unit, perUnit, false),
  };
}

const STRUCTURAL = /[{}:%=#\s]/g;
const NOT_PRINTABLE = /[^\x20-\x7e]/;
const ID_MAX = 48;

/**
 * A descriptor's key or value in a state key: state-keys.ts's escaping with `=` (between key
 * and value) and `#` (what starts a hash) escaped too, so two descriptors never share a key; a
 * long one hashed, so a 10 KB value makes a key of bounded length.
 */
function part(s: string): string {
  // Control bytes and non-ASCII are hashed, as the HTTP path's keyed values are: a key holds
  // printable ASCII only (redis-cli, KEYS patterns and logs show it as it is).
  if (NOT_PRINTABLE.test(s)) return hashed(s);
  const escaped = s.replace(STRUCTURAL, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
  return escaped.length <= ID_MAX ? escaped : hashed(s);
}

/**
 * `<prefix>{rls:<domain>}:<key>=<value>:…:<unit>`. The domain is the hash tag, so a request's
 * descriptors are one script call (one slot) in a Redis Cluster too: atomic, at the price of a
 * domain's counters sharing one slot. The unit is in the key so an override of another unit
 * never reads a window of a different length.
 */
export function stateKey(
  prefix: string,
  domain: string,
  entries: readonly DescriptorEntry[],
  values: readonly string[],
  unit: RlsUnit,
): string {
  let key = `${prefix}{rls:${part(domain)}}`;
  for (let i = 0; i < entries.length; i++) key += `:${part(entries[i]!.key)}=${part(values[i]!)}`;
  return `${key}:${unit}`;
}

/** The store's outcomes as Envoy's answer. `outcomes[i]` belongs to `plan.checks[i]`. */
export function answer(
  plan: RlsPlan,
  decision: Pick<StoreDecision, "outcomes" | "local">,
  responseHeaders: boolean,
): RlsResponse {
  let over = false;
  let closest: RlsStatus | undefined;
  const statuses = plan.slots.map((slot): RlsStatus => {
    if (slot === "unlimited") return { code: "OK", limit_remaining: MAX_UINT32 };
    if (slot === "none") return { code: "OK", limit_remaining: 0 };
    const rule = plan.rules[slot]!;
    const outcome = decision.outcomes[slot]!;
    // The deny cache answered without the store: it knows the limits it denied, not how much the
    // others have left. Those say OK with 0 remaining and no reset, rather than a guess.
    const status =
      decision.local && outcome.allowed
        ? { ...statusOf(rule, outcome), limit_remaining: 0, duration_until_reset: undefined }
        : statusOf(rule, outcome);
    if (status.duration_until_reset === undefined) delete status.duration_until_reset;
    if (status.code === "OVER_LIMIT") {
      over = true;
      closest = status;
    } else if (!over && (closest === undefined || status.limit_remaining < closest.limit_remaining)) {
      closest = status;
    }
    return status;
  });
  const response: RlsResponse = {
    overall_code: over ? "OVER_LIMIT" : "OK",
    statuses,
    response_headers_to_add: [],
  };
  if (responseHeaders && closest?.current_limit) {
    response.response_headers_to_add = [
      { key: "RateLimit-Limit", value: String(closest.current_limit.requests_per_unit) },
      { key: "RateLimit-Remaining", value: String(closest.limit_remaining) },
      { key: "RateLimit-Reset", value: String(closest.duration_until_reset?.seconds ?? 0) },
    ];
  }
  return response;
}

/**
 * One descriptor's status. A shadow limit over its limit answers OK with nothing remaining (as
 * envoyproxy/ratelimit). OVER_LIMIT says 0 remaining, whatever a large cost left.
 */
export function statusOf(rule: RlsRule, outcome: LimitOutcome): RlsStatus {
  const allowed = outcome.allowed || rule.shadow;
  const remaining = outcome.allowed ? Math.min(MAX_UINT32, Math.max(0, outcome.remaining)) : 0;
  return {
    code: allowed ? "OK" : "OVER_LIMIT",
    current_limit: {
      name: rule.name ?? "",
      requests_per_unit: rule.requestsPerUnit,
      unit: rule.unit.toUpperCase(),
    },
    limit_remaining: remaining,
    duration_until_reset: { seconds: Math.max(1, Math.ceil(outcome.resetMs / 1000)), nanos: 0 },
  };
}

/** The answer when the store gave none and the policy refuses: every limited descriptor OVER_LIMIT. */
export function refusedWithoutStore(plan: RlsPlan): RlsResponse {
  const statuses = withoutStore(plan, "OVER_LIMIT");
  const over = statuses.some((s) => s.code === "OVER_LIMIT");
  return { overall_code: over ? "OVER_LIMIT" : "OK", statuses, response_headers_to_add: [] };
}

/** The answer when the store gave none and the policy admits: every descriptor OK. */
export function admittedWithoutStore(plan: RlsPlan): RlsResponse {
  return { overall_code: "OK", statuses: withoutStore(plan, "OK"), response_headers_to_add: [] };
}

/**
 * Each descriptor's status without the store: its limit as configured, 0 remaining and no
 * reset (neither is known), `code` for the limited ones.
 */
function withoutStore(plan: RlsPlan, code: RlsStatus["code"]): RlsStatus[] {
  return plan.slots.map((slot): RlsStatus => {
    if (slot === "unlimited") return { code: "OK", limit_remaining: MAX_UINT32 };
    if (slot === "none") return { code: "OK", limit_remaining: 0 };
    const rule = plan.rules[slot]!;
    return {
      code,
      current_limit: {
        name: rule.name ?? "",
        requests_per_unit: rule.requestsPerUnit,
        unit: rule.unit.toUpperCase(),
      },
      limit_remaining: 0,
    };
  });
}
