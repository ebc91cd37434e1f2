// What Node's parser lets through but the gateway must refuse before routing: requests whose
// meaning differs from one hop to the next. Pure: it reads the parsed head only.
import { type IncomingHttpHeaders, METHODS } from "node:http";
import type { ProblemCode } from "./problem.js";

/**
 * Most header fields a request may carry (Envoy's default). Node hands a handler at most
 * `maxHeadersCount` (2000) fields and an upstream on Node reads at most 2000 too, silently
 * dropping the rest: past a few hundred padding fields a client could push the gateway's own
 * headers (X-Forwarded-For, Tollgate-*, X-Request-Id) out of what the upstream reads. Refusing
 * early (431) leaves room for what the gateway adds and keeps every hop reading the same head.
 */
export const MAX_REQUEST_HEADERS = 100;

/**
 * Largest header block, in bytes: Node's HTTP/1.1 parser refuses a larger one (the listener's
 * maxHeaderSize). HTTP/2 advertises it as SETTINGS_MAX_HEADER_LIST_SIZE, which Node enforces only
 * once the client has acknowledged it, so the first requests of a connection could carry four
 * times as much: an HTTP/2 request is measured here as RFC 9113 §6.5.2 counts (name, value and
 * 32 bytes a field).
 */
export const MAX_REQUEST_HEADER_BYTES = 16 * 1024;

export interface FramingProblem {
  code: ProblemCode;
  detail: string;
}

/**
 * A Host the gateway routes by and passes on (X-Forwarded-Host): a name of letters, digits, `-`
 * and `_` labels (one trailing dot), or an IP literal in brackets, and an optional port. Anything
 * else is refused (RFC 9112 §3.2: 400): `api.example.com,other.com`, `user@api.example.com`,
 * `api%2eexample.com`, fullwidth or other Unicode dots all route as some other host here while an
 * upstream reading X-Forwarded-Host would find api.example.com in them. Empty is allowed (a
 * request target without an authority).
 */
const HOST_VALUE = /^(?:[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*\.?|\[[0-9A-Fa-f:.]+\])(?::([0-9]{1,5}))?$/;

/** Why a Host value cannot be routed by, or null. */
export function hostValueProblem(host: string): string | null {
  if (host === "") return null;
  const m = HOST_VALUE.exec(host);
  if (!m) return "the Host header is not a host name with an optional port";
  if (m[1] !== undefined && Number(m[1]) > 65_535) return "the Host header's port is not a port";
  return null;
}

const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)/i;

/** A host compared as routing does: lower case, without a port or a trailing dot. */
function hostName(authority: string): string {
  const name = authority.startsWith("[")
    ? authority.slice(0, authority.indexOf("]") + 1)
    : authority.split(":")[0]!;
  return name.toLowerCase().replace(/\.$/, "");
}

/**
 * Refusals, in the order checked:
 * - a request line without an HTTP version (HTTP/0.9, which Node still parses, headers and all:
 *   one hop serves it as a request, another reads the bytes as garbage): 400;
 * - more than MAX_REQUEST_HEADERS fields (an HTTP/2 request's pseudo-headers are not fields:
 *   gateway/h2-compat.ts leaves them out of its rawHeaders), or an HTTP/2 header block larger
 *   than MAX_REQUEST_HEADER_BYTES: 431;
 * - an HTTP/2 request with a connection-specific field, or whose Host names another host than
 *   its `:authority` (H2_MALFORMED);
 * - a Transfer-Encoding whose last coding is not chunked (the body would run until the connection
 *   closes, read differently by every hop): 400;
 * - an HTTP/1.1 request without Host, or with two (RFC 9112 §3.2: 400); Node keeps the first and
 *   an upstream may keep the last;
 * - two Authorization fields: a singleton field; the gateway would identify the first while the
 *   upstream may read the other;
 * - a Host that is not a host name (HOST_VALUE), or an absolute-form target naming another host.
 */
export function framingProblem(
  rawHeaders: readonly string[],
  headers: IncomingHttpHeaders,
  httpVersionMajor: number,
  httpVersionMinor: number,
  /** The request target as received (absolute-form names a host of its own). */
  target?: string,
): FramingProblem | null {
  if (httpVersionMajor === 0) {
    return {
      code: "bad_request",
      detail: "the request line has no HTTP version; this gateway serves HTTP/1.0 and later",
    };
  }
  if (rawHeaders.length > 2 * MAX_REQUEST_HEADERS) {
    return {
      code: "headers_too_large",
      detail: `the request has ${rawHeaders.length / 2} header fields; this gateway accepts at most ${MAX_REQUEST_HEADERS}`,
    };
  }
  if (httpVersionMajor === 2) {
    let bytes = 0;
    for (let i = 0; i < rawHeaders.length; i += 2)
      bytes += rawHeaders[i]!.length + rawHeaders[i + 1]!.length + 32;
    if (bytes > MAX_REQUEST_HEADER_BYTES) {
      return {
        code: "headers_too_large",
        detail: `the request headers take ${bytes} bytes; this gateway accepts at most ${MAX_REQUEST_HEADER_BYTES}`,
      };
    }
    const malformed = h2Malformed(headers);
    if (malformed) return { code: "bad_request", detail: malformed };
  }
  const te = headers["transfer-encoding"];
  if (te !== undefined && !CHUNKED_LAST.test(te)) {
    return {
      code: "bad_request",
      detail: "Transfer-Encoding must end with chunked; this request's body length is ambiguous",
    };
  }
  let hosts = 0;
  let authorizations = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === "host") hosts++;
    else if (name.length === 13 && name.toLowerCase() === "authorization") authorizations++;
  }
  if (hosts === 0 && httpVersionMajor === 1 && httpVersionMinor >= 1) {
    return { code: "bad_request", detail: "an HTTP/1.1 request needs a Host header" };
  }
  if (hosts > 1) return { code: "bad_request", detail: "the request has more than one Host header" };
  if (authorizations > 1) {
    return { code: "bad_request", detail: "the request has more than one Authorization header" };
  }
  const host = headers.host;
  if (host !== undefined) {
    const problem = hostValueProblem(host);
    if (problem) return { code: "bad_request", detail: problem };
  }
  // An absolute-form target names its own host (RFC 9112 §3.2.2: the Host header is then to be
  // ignored); a front proxy would route by it while this gateway routes by Host. They must agree.
  const absolute = target === undefined ? null : ABSOLUTE_FORM.exec(target);
  if (absolute && (host === undefined || hostName(absolute[1]!) !== hostName(host))) {
    return {
      code: "bad_request",
      detail: "an absolute request target must name the host of the Host header, which routes it",
    };
  }
  return null;
}

const CHUNKED_LAST = /(?:^|,)[ \t]*chunked[ \t]*$/i;

/**
 * The methods HTTP/1.1 requests may carry: those Node's parser knows, spelled as it spells them.
 * Any other request line is a 400 before the gateway sees it; HTTP/2 hands over any `:method`
 * token. Methods are case-sensitive (RFC 9110 §9.1), yet Flask, Django and Laravel upper-case
 * one before dispatching: `post` would miss a route's `methods: [POST]` and its limits, fall
 * through to a catch-all route, and be served as a POST. So an HTTP/2 request takes the same
 * methods as an HTTP/1.1 one.
 */
const HTTP1_METHODS: ReadonlySet<string> = new Set(METHODS);

/** Fields that belong to an HTTP/1.1 connection and make an HTTP/2 request malformed. */
const CONNECTION_SPECIFIC = ["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"];

/**
 * RFC 9113 §8.2.2 and §8.3.1. nghttp2 already resets a stream that carries a connection-specific
 * field (and Node never shows it), so this is the gateway's own statement of the rule, kept for
 * whatever HTTP/2 server is put in front of the pipeline next. `:authority` is the host: a Host
 * field naming another would route by one and forward the other (X-Forwarded-Host).
 */
function h2Malformed(headers: IncomingHttpHeaders): string | null {
  const method = headers[":method"];
  if (typeof method === "string" && !HTTP1_METHODS.has(method)) {
    return "the request's :method is not one an HTTP/1.1 request line may carry, spelled as it is (methods are case-sensitive: POST, not post)";
  }
  for (const name of CONNECTION_SPECIFIC) {
    if (headers[name] !== undefined)
      return `an HTTP/2 request cannot carry ${name}: it is a connection-specific field`;
  }
  const te = headers.te;
  if (te !== undefined && te !== "trailers") return 'an HTTP/2 request\'s TE can only be "trailers"';
  const authority = headers[":authority"];
  const host = headers.host;
  if (typeof authority === "string" && host !== undefined && hostName(authority) !== hostName(host)) {
    return "the Host header names another host than the request's :authority";
  }
  return null;
}
