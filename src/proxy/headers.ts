// Header hygiene in both directions (RFC 9110 §7.6.1): hop-by-hop headers and those named in
// Connection stay on their hop; the client cannot speak for the gateway (Tollgate-*) nor for
// proxies it is not behind (X-Forwarded-*).

import type { IncomingHttpHeaders, ServerResponse } from "node:http";
import { foldHeaderName, hasFoldedSpelling } from "../http/header-names.js";
import { type HeaderRules, NO_HEADER_RULES } from "../http/header-rules.js";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "proxy-authenticate",
  "proxy-authorization",
]);

/** Headers the gateway sets toward the upstream itself; the client's copies are dropped. */
const SET_BY_GATEWAY = new Set(["host", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "via"]);

/**
 * Client-address headers other proxies and CDNs set. Only a trusted proxy may speak for its
 * client: from anyone else they are forgeries an upstream might believe, so they are dropped.
 */
const CLIENT_ADDRESS = new Set([
  "forwarded",
  "x-real-ip",
  "true-client-ip",
  "x-client-ip",
  "client-ip",
  "cf-connecting-ip",
  "fastly-client-ip",
  "x-cluster-client-ip",
  "forwarded-for",
  "x-forwarded",
  "x-originating-ip",
  "x-remote-ip",
  "x-remote-addr",
  "x-real-client-ip",
  "x-original-forwarded-for",
  "x-envoy-external-address",
  "x-appengine-user-ip",
  "x-azure-clientip",
  "x-proxyuser-ip",
  "cf-pseudo-ipv4",
  // What the request was addressed to and how: X-Forwarded-Host and -Proto by other names.
  "x-original-host",
  "x-host",
  "front-end-https",
]);

/**
 * Headers that make some upstream frameworks serve another path or method than the request
 * line's: IIS, Symfony 2-4, Zend and Laminas read X-Original-URL and X-Rewrite-URL; Express's
 * method-override, Symfony, Laravel and ASP.NET read X-HTTP-Method-Override and its variants
 * (a POST served as the DELETE a route's `methods` would have refused or limited). The upstream
 * would serve a route other than the one the gateway matched, authenticated and limited. A
 * front proxy that is trusted for the client's address passes them from its client all the
 * same, so they are dropped from everyone.
 */
const REQUEST_OVERRIDES = new Set([
  "x-original-url",
  "x-original-uri",
  "x-envoy-original-path",
  "x-rewrite-url",
  "x-http-method-override",
  "x-method-override",
  "x-http-method",
]);

/**
 * A name with `_` or `.` that folds onto a header the gateway owns (identity, forwarding, request
 * id, the API key header, hop-by-hop) is dropped (http/header-names.ts: some upstreams read it as
 * that header), as nginx drops every name with `_`.
 */
function foldsOntoOwned(lower: string, keyHeader: string): boolean {
  const folded = foldHeaderName(lower);
  return (
    SET_BY_GATEWAY.has(folded) ||
    CLIENT_ADDRESS.has(folded) ||
    REQUEST_OVERRIDES.has(folded) ||
    HOP_BY_HOP.has(folded) ||
    folded.startsWith("tollgate-") ||
    folded.startsWith("x-forwarded-") ||
    folded === "x-request-id" ||
    folded === keyHeader
  );
}

export const VIA = "1.1 tollgate";
/** RFC 9110 §7.6.3: the protocol a request was received with; HTTP/2's version is "2". */
const VIA_H2 = "2 tollgate";

function connectionTokens(value: string | string[] | undefined): Set<string> | null {
  // The usual values name only hop-by-hop headers, which are dropped anyway.
  if (!value || value === "keep-alive" || value === "close" || value === "Keep-Alive" || value === "upgrade")
    return null;
  const tokens = (Array.isArray(value) ? value.join(",") : value).split(",");
  const set = new Set<string>();
  for (const t of tokens) {
    const name = t.trim().toLowerCase();
    if (name) set.add(name);
  }
  return set.size ? set : null;
}

export interface UpstreamIdentity {
  client: string | undefined;
  tenant: string | undefined;
  plan: string | undefined;
}

export interface ForwardingContext {
  /** Host header for the upstream (its own authority). */
  upstreamHost: string;
  /** The socket peer, as text. */
  peer: string;
  /** The scheme the client spoke to the gateway (default http): X-Forwarded-Proto. */
  scheme?: "http" | "https" | undefined;
  /** Whether the peer is a trusted proxy whose X-Forwarded-Proto/-Host and client-address headers are kept. */
  peerTrusted: boolean;
  /**
   * The X-Forwarded-For the gateway extends with the peer: only what it trusts. From a trusted
   * proxy that sets X-Forwarded-For, that header; from one that sets Forwarded
   * (`client_ip_header: forwarded`), the caller's address read from it, since the client's own
   * X-Forwarded-For passes such a proxy untouched; from anyone else, nothing.
   */
  forwardedFor: string | undefined;
  identity: UpstreamIdentity;
  requestId: string;
  /** The API key header (lower case): its `_` spellings are dropped too. */
  keyHeader: string;
  /** Headers to drop (lower case): the caller's credential under `hide_credentials`. */
  hidden?: readonly string[] | undefined;
  /**
   * The body must come back readable and whole (the route reads token usage from it): whatever
   * the client asked, the upstream is asked for `Accept-Encoding: identity`, and no `Range` or
   * spelling of the client's own (`Accept_Encoding`, which some servers fold onto it) reaches it.
   */
  identityEncoding?: boolean | undefined;
  /**
   * The body is sent from memory (an AI route's, perhaps changed): its length replaces the
   * client's Content-Length, which may no longer match.
   */
  bodyLength?: number | undefined;
  /** The route's `request_headers` (over its upstream's): removed, then set. */
  rules?: HeaderRules | undefined;
}

/**
 * The request headers for the upstream, as a flat `[name, value, …]` list built from the raw
 * headers so that order, case and repeated fields survive.
 */
export function upstreamRequestHeaders(
  rawHeaders: readonly string[],
  headers: IncomingHttpHeaders,
  ctx: ForwardingContext,
): string[] {
  const named = connectionTokens(headers.connection);
  const rules = ctx.rules === undefined || ctx.rules === NO_HEADER_RULES ? undefined : ctx.rules;
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || SET_BY_GATEWAY.has(lower) || named?.has(lower)) continue;
    if (lower.startsWith("tollgate-") || lower === "x-request-id") continue;
    if (REQUEST_OVERRIDES.has(lower)) continue;
    // Only a trusted proxy speaks for what was in front of the gateway: from anyone else every
    // X-Forwarded-* the gateway does not set itself is a forgery too (a Prefix or Path that
    // Spring and ASP.NET Core prepend to the path, a Port or Ssl that changes the scheme).
    if (!ctx.peerTrusted && (CLIENT_ADDRESS.has(lower) || lower.startsWith("x-forwarded-"))) continue;
    // The gateway answers Expect: 100-continue itself, once the limits are decided (undici
    // refuses to send the header anyway).
    if (lower === "expect") continue;
    if (hasFoldedSpelling(lower) && foldsOntoOwned(lower, ctx.keyHeader)) continue;
    if (ctx.hidden?.includes(lower)) continue;
    // A range of the body could leave its usage out: the whole body, uncompressed.
    if (ctx.identityEncoding && READABLE_BODY_DROPS.has(foldHeaderName(lower))) continue;
    if (ctx.bodyLength !== undefined && lower === "content-length") continue;
    // A rule's name, in any spelling an upstream folds onto it, is the rule's alone.
    if (rules !== undefined && ruled(rules, lower)) continue;
    out.push(name, rawHeaders[i + 1]!);
  }
  if (rules !== undefined) for (const [name, value] of rules.set) out.push(name, value);
  if (ctx.identityEncoding) out.push("accept-encoding", "identity");
  if (ctx.bodyLength !== undefined) out.push("content-length", String(ctx.bodyLength));
  const priorFor = ctx.forwardedFor;
  out.push("host", ctx.upstreamHost);
  out.push("x-forwarded-for", priorFor ? `${priorFor}, ${ctx.peer}` : ctx.peer);
  out.push(
    "x-forwarded-proto",
    (ctx.peerTrusted && single(headers["x-forwarded-proto"])) || (ctx.scheme ?? "http"),
  );
  const forwardedHost = (ctx.peerTrusted && single(headers["x-forwarded-host"])) || headers.host;
  if (forwardedHost) out.push("x-forwarded-host", forwardedHost);
  // An HTTP/2 request (its pseudo-headers are still in `headers`) was received as HTTP/2.
  const via = headers[":method"] === undefined ? VIA : VIA_H2;
  out.push("via", headers.via ? `${headers.via}, ${via}` : via);
  out.push("x-request-id", ctx.requestId);
  if (ctx.identity.client !== undefined) out.push("tollgate-client", ctx.identity.client);
  if (ctx.identity.tenant !== undefined) out.push("tollgate-tenant", ctx.identity.tenant);
  if (ctx.identity.plan !== undefined) out.push("tollgate-plan", ctx.identity.plan);
  return out;
}

function single(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** What a route that reads usage from the body never lets the client ask of the upstream. */
const READABLE_BODY_DROPS = new Set(["accept-encoding", "range", "if-range"]);

/** Headers the upstream may send that never reach the client. */
const RESPONSE_DROPPED = new Set(["tollgate-cost"]);

/** Whether a header (lower case) is one the rules remove or set, in any spelling folded onto it. */
function ruled(rules: HeaderRules, lower: string): boolean {
  const folded = hasFoldedSpelling(lower) ? foldHeaderName(lower) : lower;
  if (rules.remove.has(lower) || rules.remove.has(folded)) return true;
  for (const [name] of rules.set) if (name === lower || name === folded) return true;
  return false;
}

/**
 * The upstream's response headers for the client, without hop-by-hop ones, with the route's
 * `response_headers` applied (removed, then set).
 */
export function clientResponseHeaders(
  upstream: IncomingHttpHeaders,
  rules: HeaderRules = NO_HEADER_RULES,
): Record<string, string | string[]> {
  const named = connectionTokens(upstream.connection);
  const out: Record<string, string | string[]> = {};
  const apply = rules !== NO_HEADER_RULES;
  for (const name in upstream) {
    if (HOP_BY_HOP.has(name) || RESPONSE_DROPPED.has(name) || named?.has(name)) continue;
    if (apply && ruled(rules, name)) continue;
    const value = upstream[name];
    if (value !== undefined) out[name] = value;
  }
  if (apply) for (const [name, value] of rules.set) out[name] = value;
  out.via = upstream.via ? `${upstream.via}, ${VIA}` : VIA;
  return out;
}

/**
 * A request carries a body if it says so; GET and HEAD usually do not, and then none is sent. An
 * HTTP/2 request says so by not ending its stream with its headers: Content-Length is optional
 * there (RFC 9113 §8.1) and there is no Transfer-Encoding, so a body of unknown length would
 * otherwise look like none and be dropped.
 */
export function hasBody(req: {
  headers: IncomingHttpHeaders;
  /** An HTTP/2 request's stream (Node's compatibility API). */
  stream?: { endAfterHeaders: boolean };
}): boolean {
  const headers = req.headers;
  const length = headers["content-length"];
  if (req.stream !== undefined) return !req.stream.endAfterHeaders && length !== "0";
  return headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/**
 * Writes the upstream's status and headers for the client, the gateway's own (`gateway`: rate
 * limits, request id, `connection`) on top. A gateway header that cannot be sent (Node refuses
 * characters outside Latin-1; the config refuses names that would produce one, so this is a bug)
 * costs the gateway's headers, never the response: thrown inside undici's or a socket's
 * callback, it would leave the request hanging with its lease and in-flight count held.
 */
export function writeUpstreamHead(
  res: ServerResponse,
  status: number,
  upstream: IncomingHttpHeaders,
  gateway: Readonly<Record<string, string>>,
  rules: HeaderRules = NO_HEADER_RULES,
): void {
  const out = clientResponseHeaders(upstream, rules);
  for (const name in gateway) out[name] = gateway[name]!;
  try {
    res.writeHead(status, out);
  } catch {
    const plain = clientResponseHeaders(upstream, rules);
    if (gateway.connection !== undefined) plain.connection = gateway.connection;
    res.writeHead(status, plain);
  }
}
