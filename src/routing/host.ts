// Route hosts: the pattern a route names (`api.example.com`, or `*.example.com` for every name
// below example.com) and the Host header a request brings, both brought to one spelling so that
// matching them is comparing strings. DNS names are case-insensitive and `api.example.com.` is
// the same name fully qualified (RFC 1034 §3.1); the port is the listener's business, not the
// route's (RFC 9110 §7.2: Host is uri-host [ ":" port ]).

/** A host pattern's `*.` form: every name that ends with the rest, the rest itself excluded. */
export const WILDCARD = "*.";

/**
 * One DNS label as a Host header carries it: letters, digits, `-` and `_` (found in internal
 * names, which RFC 3986's reg-name allows), at most 63 characters (RFC 1035 §2.3.4).
 */
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
/** A whole name (RFC 1035 §2.3.4), counted without the trailing dot. */
const MAX_NAME = 253;

/**
 * Why `written` cannot be a route's host, in words that say what to write instead; undefined
 * when it can. A route host is compared with the Host header's name alone, so anything else a
 * URL holds (a scheme, a port, a path) would make the route match nothing, and is refused here
 * rather than left to never match.
 */
export function hostPatternProblem(written: string): string | undefined {
  const example = "write it like api.example.com, or *.example.com for every name below example.com";
  const scheme = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//.exec(written);
  if (scheme) return `a route host has no scheme: ${example}`;
  if (written.includes("/")) return `a route host has no path (match.path says which paths): ${example}`;
  if (written.startsWith("[") || (written.match(/:/g)?.length ?? 0) > 1)
    return "an IPv6 address cannot be a route host: it has many spellings, so a Host header could name it in one the route does not match; leave host out";
  if (written.includes(":"))
    return `a route host has no port: the Host header's port is ignored when matching; ${example}`;
  const name = normalizeHostPattern(written);
  const labels = name.split(".");
  const wildcard = labels[0] === "*";
  if (labels.some((label, i) => label.includes("*") && !(i === 0 && label === "*")))
    return `"*" may only be a whole first label, as in *.example.com (every name below example.com)`;
  if (wildcard && labels.length === 1) return `"*" alone would match every host: leave host out instead`;
  if (name.length > MAX_NAME) return `a host name is at most ${MAX_NAME} characters`;
  const bad = labels.find((label, i) => !(wildcard && i === 0) && !LABEL.test(label));
  if (bad !== undefined) {
    return bad === ""
      ? `"${written}" has an empty label (two dots in a row, or a leading dot): ${example}`
      : `"${bad}" is not a host label: letters, digits, "-" and "_" only, not starting or ending with "-", at most 63 of them`;
  }
  return undefined;
}

/**
 * The spelling a valid pattern is matched in: lower-case, without the trailing dot of a fully
 * qualified name. `*.Example.COM.` becomes `*.example.com`.
 */
export function normalizeHostPattern(written: string): string {
  const lower = written.toLowerCase();
  return lower.endsWith(".") ? lower.slice(0, -1) : lower;
}

/**
 * The name a request's Host header gives, spelled as patterns are: without the port,
 * lower-case, without a trailing dot; undefined without a Host (HTTP/1.0) or with an empty one.
 * An IPv6 literal keeps its brackets, so its colons are never taken for a port. Framing already
 * refused a request with two Host headers (http/request-framing.ts).
 */
export function requestHost(header: string | undefined): string | undefined {
  if (header === undefined || header.length === 0) return undefined;
  let end = header.length;
  if (header.charCodeAt(0) === 0x5b /* [ */) {
    const close = header.indexOf("]");
    if (close !== -1) end = close + 1;
  } else {
    const colon = header.indexOf(":");
    if (colon !== -1) end = colon;
  }
  if (end > 1 && header.charCodeAt(end - 1) === 0x2e /* . */) end--;
  if (end === 0) return undefined;
  // toLowerCase answers the same string when nothing changes: the usual lower-case Host
  // without a port costs no allocation.
  return (end === header.length ? header : header.slice(0, end)).toLowerCase();
}
