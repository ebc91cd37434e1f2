// How long a key set fetched from an identity provider may be used before it is fetched again,
// from the answer's cache headers (RFC 9111 §4.2.1: Cache-Control max-age wins over Expires, and
// Age, set by a cache in front of the IdP, is time already spent). Pure: the caller gives the
// time. A header that cannot be read is not guessed at: the answer counts as already stale, and
// the floor keeps a stale or no-store answer from being fetched again on every request.

export interface LifetimeBounds {
  /** No key set is fetched again sooner than this after it arrived, whatever the headers say. */
  floorMs: number;
  /** Nor kept longer than this without a fetch: an IdP saying a year still rotates. */
  ceilingMs: number;
}

/** The cache headers of one answer, as node:http gives them (lower-case names). */
export interface CacheHeaders {
  "cache-control"?: string | undefined;
  expires?: string | undefined;
  date?: string | undefined;
  age?: string | undefined;
}

/** With no cache header at all: five minutes (then bounded like any other). */
export const DEFAULT_LIFETIME_MS = 5 * 60_000;

export interface Lifetime {
  lifetimeMs: number;
  /** Which header decided, for the logs and the tests. */
  from: "max-age" | "no-store" | "expires" | "default";
}

/** The lifetime of an answer received at `nowMs`, bounded by `bounds`. */
export function keysLifetime(headers: CacheHeaders, nowMs: number, bounds: LifetimeBounds): Lifetime {
  const raw = rawLifetime(headers, nowMs);
  const lifetimeMs = Math.min(Math.max(raw.lifetimeMs, bounds.floorMs), bounds.ceilingMs);
  return { lifetimeMs, from: raw.from };
}

function rawLifetime(headers: CacheHeaders, nowMs: number): Lifetime {
  const directives = cacheControl(headers["cache-control"]);
  if (directives.has("no-store") || directives.has("no-cache")) return { lifetimeMs: 0, from: "no-store" };
  const ageMs = deltaSeconds(headers.age) ?? 0;
  const maxAge = directives.get("max-age");
  if (maxAge !== undefined) {
    // A max-age that is not delta-seconds, or two of them, make the answer stale (§4.2.1).
    const seconds = maxAge.length === 1 ? deltaSeconds(maxAge[0]) : undefined;
    return { lifetimeMs: seconds === undefined ? 0 : Math.max(seconds - ageMs, 0), from: "max-age" };
  }
  if (headers.expires !== undefined) {
    // Relative to the IdP's own Date, so a skewed clock on either side does not stretch it;
    // an invalid date (often "0") means already expired (§5.3).
    const expires = httpDate(headers.expires);
    const date = headers.date === undefined ? undefined : httpDate(headers.date);
    if (expires === undefined) return { lifetimeMs: 0, from: "expires" };
    return { lifetimeMs: Math.max(expires - (date ?? nowMs) - ageMs, 0), from: "expires" };
  }
  return { lifetimeMs: Math.max(DEFAULT_LIFETIME_MS - ageMs, 0), from: "default" };
}

/** Directive name (lower case) → every value given for it (undefined for a bare directive). */
function cacheControl(header: string | undefined): Map<string, (string | undefined)[]> {
  const out = new Map<string, (string | undefined)[]>();
  if (header === undefined) return out;
  for (const part of header.split(",")) {
    const eq = part.indexOf("=");
    const name = (eq < 0 ? part : part.slice(0, eq)).trim().toLowerCase();
    if (name === "") continue;
    let value = eq < 0 ? undefined : part.slice(eq + 1).trim();
    // A quoted value is accepted though senders must not quote max-age (§5.2.2.1).
    if (value !== undefined && value.length >= 2 && value.startsWith('"') && value.endsWith('"'))
      value = value.slice(1, -1);
    out.set(name, [...(out.get(name) ?? []), value]);
  }
  return out;
}

/** The largest delta-seconds a cache must keep: a larger value means this (§1.2.2). */
const MAX_DELTA_SECONDS = 2 ** 31;

/**
 * Non-negative whole seconds in milliseconds (§1.2.2), a value past 2^31 taken as 2^31 (an
 * IdP saying "forever" gets the ceiling, not the floor); anything else undefined.
 */
function deltaSeconds(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d+$/.test(text.trim())) return undefined;
  return Math.min(Number(text.trim()), MAX_DELTA_SECONDS) * 1000;
}

/** An HTTP-date (IMF-fixdate and the obsolete forms Date.parse reads), else undefined. */
function httpDate(text: string): number | undefined {
  if (!/[A-Za-z]{3}/.test(text)) return undefined; // "0", "-1", a bare number: invalid
  const ms = Date.parse(text);
  return Number.isFinite(ms) ? ms : undefined;
}
