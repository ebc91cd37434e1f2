// The one key layout of the limits in the store. The limiter writes under these keys, the
// library's createLimiter under its own, and the admin API reads and resets the same ones: a key
// spelt differently in one of them would read or reset a state nothing decides with.
import type { Caller } from "../identity/caller.js";
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

/**
 * The key prefix of a scope. The hash tag is the tenant when the caller has one, so every limit
 * of a tenant's callers lives in one Redis Cluster slot; per-client limits add the client after it.
 */
export function scopeKey(scope: LimitScope, caller: Caller): string {
  // IP keys are canonical text built here (hex, digits, `.`, `:`, `/`): nothing to escape.
  if (scope === "ip" || caller.kind === "anonymous") return `{ip:${caller.ipKey}}:`;
  if (caller.tenant !== undefined) {
    const tag = `{t:${keyPart(caller.tenant)}}:`;
    return scope === "tenant" ? tag : `${tag}c:${keyPart(caller.id)}:`;
  }
  return `{c:${keyPart(caller.id)}}:`;
}

/**
 * A plan's `tenant` limit binds callers that have a tenant; others have nothing to share it with,
 * and no key for it. (A `by: tenant` route is not tenant-only: without a tenant it keys on the caller.)
 */
export function binds(limit: PlannedLimit, caller: Caller): boolean {
  return !limit.tenantOnly || (caller.kind === "client" && caller.tenant !== undefined);
}

/** Where the gateway keeps one planned limit's state for one caller. */
export function limitKey(prefix: string, scope: LimitScope, caller: Caller, limitName: string): string {
  return prefix + scopeKey(scope, caller) + limitName;
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

/** The buckets that cover the last hour, newest first. */
export function lastHourTopKeys(prefix: string, nowMs: number): string[] {
  const keys: string[] = [];
  for (let i = 0; i < 3_600_000 / TOP_BUCKET_MS; i++)
    keys.push(topDenialsKey(prefix, nowMs - i * TOP_BUCKET_MS));
  return keys;
}
