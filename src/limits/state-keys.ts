// The one key layout of the limits in the store. The limiter writes under these keys, the
// library's createLimiter under its own, and the admin API reads and resets the same ones: a key
// spelt differently in one of them would read or reset a state nothing decides with.
import type { Caller } from "../identity/caller.js";
import { hashed, type KeyBy, type KeyedRequest, keyTail } from "./key-by.js";
import type { LimitScope, PlannedLimit } from "./plan.js";
import { TOP_BUCKET_MS } from "./stores/contract.js";

const STRUCTURAL = /[{}:%\s]/;
const STRUCTURAL_ALL = /[{}:%\s]/g;

/** `{`, `}` and `:` structure the key (hash tag, separators); escape them in ids. */
export function keyPart(id: string): string {
  return STRUCTURAL.test(id)
    ? id.replace(STRUCTURAL_ALL, (c) => `%${c.charCodeAt(0).toString(16).padStart(2, "0")}`)
    : id;
}

/** Longest escaped id written in a key as it is; a longer one is hashed, so ids bound the key. */
const ID_MAX = 48;

/** A client id or tenant in a key: escaped (keyPart), or hashed when that is longer than ID_MAX. */
export function idPart(id: string): string {
  const part = keyPart(id);
  return part.length <= ID_MAX ? part : hashed(id);
}

/**
 * The key prefix of a scope. The hash tag is the tenant when the caller has one, so every limit
 * of a tenant's callers lives in one Redis Cluster slot; per-client limits add the client after it.
 */
export function scopeKey(scope: LimitScope, caller: Caller): string {
  // IP keys are canonical text built here (hex, digits, `.`, `:`, `/`): nothing to escape.
  if (scope === "ip" || caller.kind === "anonymous") return `{ip:${caller.ipKey}}:`;
  if (caller.tenant !== undefined) {
    const tag = `{t:${idPart(caller.tenant)}}:`;
    return scope === "tenant" ? tag : `${tag}c:${idPart(caller.id)}:`;
  }
  return `{c:${idPart(caller.id)}}:`;
}

/**
 * A plan's `tenant` limit binds callers that have a tenant; others have nothing to share it with,
 * and no key for it. (A `by: tenant` route is not tenant-only: without a tenant it keys on the caller.)
 */
export function binds(limit: PlannedLimit, caller: Caller): boolean {
  return !limit.tenantOnly || (caller.kind === "client" && caller.tenant !== undefined);
}

/** Where the gateway keeps one caller-keyed limit's state (a lone caller, tenant or ip `by`). */
export function limitKey(prefix: string, scope: LimitScope, caller: Caller, limitName: string): string {
  return prefix + scopeKey(scope, caller) + limitName;
}

/**
 * Where the gateway keeps one limit's state for one request, whatever its `by`:
 * - a lone caller, tenant or ip part: `{c:bob}:free.global` (limitKey, as it has always been);
 * - with such a part among others: that scope's hash tag, the name, then the other parts'
 *   values: `{c:bob}:free.models:h.x-model=gpt-4`, in the caller's slot beside its other limits;
 * - without one: the name and values are the hash tag, `{search.total:r=search}`,
 *   `{search.per-org:h.x-org-id=acme}`, so values spread over a cluster and a route budget is one key.
 * Limit names hold a `.` and no `:` (config/schema.ts), so the last form never reads as a scope's tag.
 */
export function requestLimitKey(
  prefix: string,
  by: KeyBy,
  limitName: string,
  caller: Caller,
  routeName: string,
  request: KeyedRequest | undefined,
): string {
  if (by.scope !== undefined) return prefix + scopeKey(by.scope, caller) + limitName;
  const tail = keyTail(by, by.tagPart, caller, routeName, request);
  if (by.tagPart !== undefined) return `${prefix}${scopeKey(by.tagPart.kind, caller)}${limitName}:${tail}`;
  return `${prefix}{${limitName}:${tail}}`;
}

/** Where the library (createLimiter) keeps one named limit's state for one key. */
export function libraryLimitKey(prefix: string, key: string, limitName: string): string {
  return `${prefix}{${keyPart(key)}}:${limitName}`;
}

/** How the admin API and the top list name a caller: `client:<id>` or `ip:<addr>`. */
export function callerLabel(caller: Caller): string {
  return caller.kind === "client" ? `client:${caller.id}` : `ip:${caller.ipKey}`;
}

/** A caller's capped denial log, under the caller's own hash tag. */
export function denialLogKey(prefix: string, caller: Caller): string {
  return `${prefix}${scopeKey("caller", caller)}denials`;
}

/** The five-minute bucket of the top-denials list that `nowMs` falls in. */
export function topDenialsKey(prefix: string, nowMs: number): string {
  return `${prefix}{denials}:top:${Math.floor(nowMs / TOP_BUCKET_MS) * TOP_BUCKET_MS}`;
}

/**
 * The buckets that cover the last hour (or the last `windowMs`, rounded up to whole buckets:
 * the current one, partly elapsed, counts as one), newest first.
 */
export function lastHourTopKeys(prefix: string, nowMs: number, windowMs = 3_600_000): string[] {
  const keys: string[] = [];
  for (let i = 0; i < Math.ceil(windowMs / TOP_BUCKET_MS); i++)
    keys.push(topDenialsKey(prefix, nowMs - i * TOP_BUCKET_MS));
  return keys;
}
