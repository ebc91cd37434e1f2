// Header rules (`request_headers`, `response_headers` on an upstream and on a route): headers the
// gateway sets on, or removes from, what goes to the upstream and what comes back from it. The
// provider's credential (`authorization: "Bearer ${OPENAI_API_KEY}"`) is the reason they exist:
// tollgate can then stand between customers and a provider with one key of its own.
//
// A route's rule for a header name wins over its upstream's for that name, whatever either says
// (a route can remove what its upstream sets, or set what it removes). Names the gateway owns
// cannot be set or removed this way: its own (`Tollgate-*`, `X-Request-Id`), the forwarding ones
// it writes (`X-Forwarded-*`, `Forwarded`, `Via`, `Host`), the framing and hop-by-hop ones, and in
// answers the rate-limit ones, which say what the gateway decided.

/** One direction's rules, compiled: names lower case. */
export interface HeaderRules {
  /** Set in this order; a client's (or upstream's) header of the same name, any spelling, is dropped. */
  readonly set: readonly (readonly [name: string, value: string])[];
  readonly remove: ReadonlySet<string>;
}

export const NO_HEADER_RULES: HeaderRules = Object.freeze({
  set: Object.freeze([]),
  remove: new Set<string>(),
});

/** A rule as the config writes it. */
export interface WrittenHeaderRules {
  set?: Readonly<Record<string, string>> | undefined;
  remove?: readonly string[] | undefined;
}

/** The rules of a route over its upstream's, the route winning per header name. */
export function mergeHeaderRules(
  upstream: WrittenHeaderRules | undefined,
  route: WrittenHeaderRules | undefined,
): HeaderRules {
  if (!upstream && !route) return NO_HEADER_RULES;
  const set = new Map<string, string>();
  const remove = new Set<string>();
  for (const rules of [upstream, route]) {
    if (!rules) continue;
    for (const name of rules.remove ?? []) {
      const lower = name.toLowerCase();
      set.delete(lower);
      remove.add(lower);
    }
    for (const [name, value] of Object.entries(rules.set ?? {})) {
      const lower = name.toLowerCase();
      remove.delete(lower);
      set.set(lower, value);
    }
  }
  if (set.size === 0 && remove.size === 0) return NO_HEADER_RULES;
  return Object.freeze({
    set: Object.freeze([...set].map(([n, v]) => Object.freeze([n, v] as const))),
    remove,
  });
}

const HOP_BY_HOP = [
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "proxy-authenticate",
  "proxy-authorization",
];
const FRAMING = ["content-length", "host", "expect"];
// The client-address headers upstreams read beside X-Forwarded-For: a rule that set one would
// tell the upstream an address the gateway did not vouch for.
const FORWARDING = [
  "forwarded",
  "via",
  "x-request-id",
  "x-real-ip",
  "true-client-ip",
  "x-client-ip",
  "cf-connecting-ip",
];

/** Why a request header rule may not name `lower`, or undefined when it may. */
export function ownedRequestHeader(name: string): string | undefined {
  const lower = canonicalHeader(name);
  if (lower.startsWith("tollgate-")) return "the gateway tells the upstream who called in Tollgate-* headers";
  if (lower.startsWith("x-forwarded-") || FORWARDING.includes(lower))
    return "the gateway writes the forwarding headers itself";
  if (HOP_BY_HOP.includes(lower) || FRAMING.includes(lower)) return "it frames the request, hop by hop";
  return undefined;
}

/**
 * A header name as the servers behind the gateway may read it: lower case, with `_` and `.` as
 * `-` (nginx with underscores_in_headers, CGI-style frameworks, WSGI and PHP map `Tollgate_Client`
 * onto `tollgate-client`), so a rule cannot spell an owned header some other way.
 */
export function canonicalHeader(name: string): string {
  return name.toLowerCase().replace(/[_.]/g, "-");
}

/** Why a response header rule may not name `lower`, or undefined when it may. */
export function ownedResponseHeader(name: string): string | undefined {
  const lower = canonicalHeader(name);
  if (lower.startsWith("tollgate-") || lower === "x-request-id")
    return "the gateway's own headers say what it did";
  if (
    lower.startsWith("ratelimit") ||
    lower.startsWith("x-ratelimit-") ||
    lower === "retry-after" ||
    lower === "retry-after-ms" ||
    lower === "x-should-retry"
  )
    return "the rate-limit headers say what the gateway decided";
  if (HOP_BY_HOP.includes(lower) || lower === "content-length" || lower === "via")
    return "it frames the response, hop by hop";
  return undefined;
}
