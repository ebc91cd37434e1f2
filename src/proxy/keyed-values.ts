// Whether the values a route's limits key by are the values its upstream will read. A limit kept
// per `header:x-org-id` or `query:model` counts the request under the value the gateway reads; if
// the upstream may serve it by another spelling of the same field, a client picks its budget. So a
// request is refused (400) when a keyed field is:
// - given twice: which copy an upstream reads is its own choice (first, last, all joined);
// - spelt another way the upstream folds onto it: CGI, WSGI, Rack and PHP read `x_org_id` as
//   `x-org-id` (PHP `x.org.id` too); frameworks read `MODEL` (ASP.NET) or `model[]` (PHP, Rack)
//   as `model`, PHP `user.id`, `user id` and `user[id` as `user_id`;
// - named in Connection: it would be removed as hop-by-hop before the upstream, which would then
//   serve the request as if it had no value while it was counted under one;
// - a query value holding a raw `;`: Rack 2, Go before 1.17 and older Python split the query on it.
// Only routes some limit keys by a header or query parameter pay for this (compile.ts lists them).
import { foldHeaderName, hasFoldedSpelling } from "../http/header-names.js";

/** Singleton fields whose value may hold a comma: never a list, so never split by an upstream. */
const ONE_VALUE_WITH_COMMAS: ReadonlySet<string> = new Set([
  "user-agent",
  "referer",
  "date",
  "if-modified-since",
  "if-unmodified-since",
  "if-range",
  "cookie",
  "content-disposition",
]);

/** The fields of a route its limits key by (CompiledRoute). */
export interface KeyedFields {
  /** Lower-case header names. */
  readonly keyedHeaders: readonly string[];
  /** Query parameter names as configured. */
  readonly keyedQuery: readonly string[];
}

/** Why the request's keyed values are ambiguous, or undefined when they are not. */
export function keyedValueProblem(
  route: KeyedFields,
  rawHeaders: readonly string[],
  query: string,
): string | undefined {
  if (route.keyedHeaders.length > 0) {
    const problem = headerProblem(route.keyedHeaders, rawHeaders);
    if (problem) return problem;
  }
  return route.keyedQuery.length > 0 ? queryProblem(route.keyedQuery, query) : undefined;
}

function headerProblem(keyed: readonly string[], rawHeaders: readonly string[]): string | undefined {
  let seen: Set<string> | undefined;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    if (lower === "connection") {
      for (const token of rawHeaders[i + 1]!.split(",")) {
        const named = foldHeaderName(token.trim().toLowerCase());
        if (keyed.includes(named)) {
          return `the request lists ${named} in Connection, which would remove it before the upstream; a limit of this route is kept per its value, so do not list it`;
        }
      }
      continue;
    }
    const folded = hasFoldedSpelling(lower) ? foldHeaderName(lower) : lower;
    if (!keyed.includes(folded)) continue;
    if (folded !== lower) {
      return `the request carries ${rawHeaders[i]}, which CGI, WSGI, Rack or PHP upstreams read as ${folded}; a limit of this route is kept per ${folded}, so send it under that name only`;
    }
    seen ??= new Set();
    if (seen.has(folded)) {
      return `the request carries the ${folded} header more than once; a limit of this route is kept per its value, so send it once`;
    }
    // `acme, acme` in one line is the list two lines make (RFC 9110 §5.3), and an upstream may
    // read either member; keyed as written it would be a budget of its own. Fields that are one
    // value whose own grammar holds commas (a browser's User-Agent, a date) are read whole.
    if (!ONE_VALUE_WITH_COMMAS.has(folded) && rawHeaders[i + 1]!.includes(",")) {
      return `the request's ${folded} header holds a list of values; a limit of this route is kept per its value, so send one value, once`;
    }
    seen.add(folded);
  }
  return undefined;
}

/**
 * The first of a route's `trusted_headers` the request carries (any spelling an upstream folds
 * onto it), or undefined. Only asked of requests from peers that are not trusted proxies.
 */
export function forgedTrustedHeader(
  trusted: readonly string[],
  rawHeaders: readonly string[],
): string | undefined {
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const lower = rawHeaders[i]!.toLowerCase();
    const folded = hasFoldedSpelling(lower) ? foldHeaderName(lower) : lower;
    if (trusted.includes(folded)) return folded;
  }
  return undefined;
}

function queryProblem(keyed: readonly string[], query: string): string | undefined {
  if (query.length < 2) return undefined;
  const folded = keyed.map(foldName);
  const seen = new Set<string>();
  // `&` and `;` both separate here: a parameter hidden behind a `;` is a second copy to an
  // upstream that splits on it.
  for (const pair of query.slice(1).split(/[&;]/)) {
    if (pair === "") continue;
    const eq = pair.indexOf("=");
    const name = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
    const at = folded.indexOf(foldName(name));
    if (at === -1) continue;
    const configured = keyed[at]!;
    if (name !== configured) {
      return `the query parameter "${name}" is read as "${configured}" by some frameworks; a limit of this route is kept per "${configured}", so give it under that name only`;
    }
    if (seen.has(configured)) {
      return `the query parameter "${configured}" is given more than once (or after a ";"); a limit of this route is kept per its value, so give it once`;
    }
    seen.add(configured);
  }
  // A raw `;` inside a keyed value: the `&` parse keeps it, a `;` parse cuts the value there.
  const params = new URLSearchParams(query.slice(1));
  for (const name of keyed) {
    if (params.get(name)?.includes(";") && rawValueHasSemicolon(query, name)) {
      return `the query parameter "${name}" holds a ";", where some frameworks split the query; a limit of this route is kept per its value, so encode it as %3B`;
    }
  }
  return undefined;
}

const MAY_NAME_METHOD = /method|%/i;

/**
 * A `_method` query parameter, in any spelling PHP reads as it: Laravel and Symfony serve a POST
 * as the method it names, past the route (and the limits) the gateway matched for the request
 * line's method. (A `_method` in a form body is the upstream's to ignore: the gateway does not
 * read bodies; README says so.)
 */
export function methodOverrideProblem(query: string): string | undefined {
  // On every request with a query: parsed only when a name could spell it (`method` written
  // out in some case, or hidden behind a percent-escape).
  if (query.length < 2 || !MAY_NAME_METHOD.test(query)) return undefined;
  for (const pair of query.slice(1).split(/[&;]/)) {
    const eq = pair.indexOf("=");
    const name = decodeComponent(eq === -1 ? pair : pair.slice(0, eq));
    if (foldName(name) === "_method") {
      return `the query parameter "${name}" asks some frameworks to serve the request as another method than the request line's; send the method itself`;
    }
  }
  return undefined;
}

/**
 * `model`, `MODEL` and `model[]` are one parameter to some framework; PHP also drops leading
 * spaces, ends a name at a NUL, reads `user_id[0]` as an array under `user_id`, and `.`, a space
 * and a `[` without its `]` as `_`, so `user.id`, `user id`, `+user_id`, `user[id`,
 * `user_id%00x` and `user_id[0]` are all its `user_id`.
 */
function foldName(name: string): string {
  let lower = name.toLowerCase();
  // PHP reads a name as a C string: `user_id%00junk` is its `user_id`.
  const nul = lower.indexOf("\0");
  if (nul !== -1) lower = lower.slice(0, nul);
  lower = lower.replace(/^ +/, "");
  // `user_id[]`, `user_id[0]`, `user_id[a]`: PHP's array under the name before the bracket.
  const open = lower.indexOf("[");
  if (open > 0 && lower.indexOf("]", open) !== -1) lower = lower.slice(0, open);
  return lower.replace(/[. []/g, "_");
}

function decodeComponent(text: string): string {
  const spaced = text.includes("+") ? text.replace(/\+/g, " ") : text;
  if (!spaced.includes("%")) return spaced;
  try {
    return decodeURIComponent(spaced);
  } catch {
    return spaced;
  }
}

/** Whether the `&`-separated value of `name` holds a `;` as written (not `%3B`). */
function rawValueHasSemicolon(query: string, name: string): boolean {
  for (const pair of query.slice(1).split("&")) {
    const eq = pair.indexOf("=");
    if (eq !== -1 && decodeComponent(pair.slice(0, eq)) === name && pair.indexOf(";", eq) !== -1) return true;
  }
  return false;
}
