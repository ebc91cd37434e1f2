// The path an upstream receives when a route rewrites it: `strip_prefix: true` drops the route's
// prefix, `rewrite: { prefix }` puts another in its place. Applied to the normalised path (so
// every spelling of a request is rewritten alike), after the route was chosen: the route, its
// limits and their keys stay those of the client's path (`by: segment:<n>` counts the client's
// segments, not the upstream's).
//
// Matching is case-insensitive (the route's prefix is kept lower-cased) while the forwarded path
// keeps the client's case, so the prefix is cut by its length: the normalised path is ASCII
// (anything else stays percent-encoded), where lower-casing keeps every length.

/** A route's rewrite, compiled: the route's matched prefix and what replaces it. */
export interface PathRewrite {
  /** The route's match prefix as the matcher holds it: lower-case, no trailing slash, or `/`. */
  readonly from: string;
  /** What replaces it: `""` strips it, else a normalised path without a trailing slash. */
  readonly to: string;
}

/**
 * The compiled rewrite of a route, or null when it has none. `prefix` is `rewrite.prefix` as
 * written (checks.ts holds it normalised); `/` means the same as stripping.
 */
export function compileRewrite(
  matchPrefix: string,
  strip: boolean,
  prefix: string | undefined,
): PathRewrite | null {
  if (prefix !== undefined) return { from: matchPrefix, to: prefix.replace(/\/+$/, "") };
  return strip ? { from: matchPrefix, to: "" } : null;
}

/**
 * `path` (normalised, case kept, no query) with the route's prefix replaced, on a segment
 * boundary: `/v1/billing` stripped gives `/`, `/v1/billing/x` gives `/x`, `/v1/billing/` gives
 * `/`. A route of `/` has no prefix to drop: its rewrite is prepended, as an upstream URL's
 * path is. Throws if `path` is not below the prefix: the route was matched on it, so that would
 * be a bug in the caller, and forwarding anything would be a guess.
 */
export function rewritePath(path: string, rewrite: PathRewrite): string {
  const { from, to } = rewrite;
  if (from === "/") return to + path;
  const n = from.length;
  if (
    path.length < n ||
    (path.length > n && path.charCodeAt(n) !== 0x2f) ||
    path.slice(0, n).toLowerCase() !== from
  ) {
    throw new Error(`the path ${JSON.stringify(path)} is not below the route prefix ${from}`);
  }
  return to + path.slice(n) || "/";
}
