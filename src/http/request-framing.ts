// What Node's parser lets through but the gateway must refuse before routing: requests whose
// meaning differs from one hop to the next. Pure: it reads the parsed head only.
import type { IncomingHttpHeaders } from "node:http";
import type { ProblemCode } from "./problem.js";

/**
 * Most header fields a request may carry (Envoy's default). Node hands a handler at most
 * `maxHeadersCount` (2000) fields and an upstream on Node reads at most 2000 too, silently
 * dropping the rest: past a few hundred padding fields a client could push the gateway's own
 * headers (X-Forwarded-For, Tollgate-*, X-Request-Id) out of what the upstream reads. Refusing
 * early (431) leaves room for what the gateway adds and keeps every hop reading the same head.
 */
export const MAX_REQUEST_HEADERS = 100;

export interface FramingProblem {
  code: ProblemCode;
  detail: string;
}

/**
 * Refusals, in the order checked:
 * - more than MAX_REQUEST_HEADERS fields: 431;
 * - a Transfer-Encoding whose last coding is not chunked (the body would run until the connection
 *   closes, read differently by every hop): 400;
 * - an HTTP/1.1 request without Host, or with two (RFC 9112 §3.2: 400); Node keeps the first and
 *   an upstream may keep the last;
 * - two Authorization fields: a singleton field; the gateway would identify the first while the
 *   upstream may read the other.
 */
export function framingProblem(
  rawHeaders: readonly string[],
  headers: IncomingHttpHeaders,
  httpVersionMajor: number,
  httpVersionMinor: number,
): FramingProblem | null {
  if (rawHeaders.length > 2 * MAX_REQUEST_HEADERS) {
    return {
      code: "headers_too_large",
      detail: `the request has ${rawHeaders.length / 2} header fields; this gateway accepts at most ${MAX_REQUEST_HEADERS}`,
    };
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
  return null;
}

const CHUNKED_LAST = /(?:^|,)[ \t]*chunked[ \t]*$/i;
