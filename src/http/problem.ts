// application/problem+json (RFC 9457) for every error the gateway and its admin API answer: one
// table, one type URI per code. Operators and clients match on `type`, so a URI never changes
// once published; `detail` is per request and for people.
import type { ServerResponse } from "node:http";

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  [extension: string]: unknown;
}

const OWN = "https://tollgate.dev/problems/";
/** RFC 9457's registry: the two kinds a rate limiter answers that clients already know. */
const IANA = "https://iana.org/assignments/http-problem-types#";

/** Every problem type: a stable code, its status, its title and its type URI. */
export const PROBLEMS = {
  /** A path that cannot be normalised (bad escapes, `..` above the root, …): only that. */
  bad_path: { status: 400, title: "Bad Request", type: `${OWN}bad-path` },
  /**
   * A request every hop might read differently (framing, no or two Host, two Authorization,
   * invalid HTTP), or a connection without a usable peer address.
   */
  bad_request: { status: 400, title: "Bad Request", type: `${OWN}bad-request` },
  unauthorized: { status: 401, title: "Unauthorized", type: `${OWN}unauthorized` },
  caller_denied: { status: 403, title: "Forbidden", type: `${OWN}caller-denied` },
  /**
   * The caller's plan does not include the route, or the model an AI request names
   * (`plans.<plan>.allow`); decided before any limit is charged.
   */
  not_entitled: { status: 403, title: "Forbidden", type: `${OWN}not-entitled` },
  no_route: { status: 404, title: "Not Found", type: `${OWN}no-route` },
  method_not_allowed: { status: 405, title: "Method Not Allowed", type: `${OWN}method-not-allowed` },
  request_timeout: { status: 408, title: "Request Timeout", type: `${OWN}request-timeout` },
  body_too_large: { status: 413, title: "Content Too Large", type: `${OWN}body-too-large` },
  /** An AI route's body sent as something other than JSON, or compressed: it must read it. */
  unsupported_media_type: {
    status: 415,
    title: "Unsupported Media Type",
    type: `${OWN}unsupported-media-type`,
  },
  /** A limit denied the request, or its address sent too many bad credentials. */
  quota_exceeded: { status: 429, title: "Too Many Requests", type: `${IANA}quota-exceeded` },
  headers_too_large: {
    status: 431,
    title: "Request Header Fields Too Large",
    type: `${OWN}headers-too-large`,
  },
  internal_error: { status: 500, title: "Internal Server Error", type: `${OWN}internal-error` },
  upstream_unreachable: { status: 502, title: "Bad Gateway", type: `${OWN}upstream-unreachable` },
  /** The limit store cannot decide and the route fails closed. */
  temporary_reduced_capacity: {
    status: 503,
    title: "Service Unavailable",
    type: `${IANA}temporary-reduced-capacity`,
  },
  upstream_timeout: { status: 504, title: "Gateway Timeout", type: `${OWN}upstream-timeout` },

  // The admin API's own (its 401, 405 and 500 are the gateway's above).
  /** `/admin/*` without admin.token or admin.tokens configured. */
  admin_disabled: { status: 404, title: "Not Found", type: `${OWN}admin-disabled` },
  no_endpoint: { status: 404, title: "Not Found", type: `${OWN}no-endpoint` },
  /** A known admin token whose scope does not cover the request (a read token on a write). */
  insufficient_scope: { status: 403, title: "Forbidden", type: `${OWN}insufficient-scope` },
  /**
   * A console action (any method but GET and HEAD on a session cookie) without the session's
   * CSRF token in X-Tollgate-CSRF: a page of another site cannot send it.
   */
  bad_csrf: { status: 403, title: "Forbidden", type: `${OWN}bad-csrf` },
  /** GET /admin/denials/top with `minutes` other than 5, 10, … 60. */
  bad_denials_query: { status: 400, title: "Bad Request", type: `${OWN}bad-denials-query` },
  /** GET /admin/audit with a `limit` it cannot read. */
  bad_audit_query: { status: 400, title: "Bad Request", type: `${OWN}bad-audit-query` },
  /** An operator named a caller the admin API cannot read (`client:<id>`, `tenant:<id>`, `ip:<address>`). */
  bad_caller: { status: 400, title: "Bad Request", type: `${OWN}bad-caller` },
  /** A well-formed caller with no limits to show (unknown client, no plan, no tenant limit). */
  unknown_caller: { status: 404, title: "Not Found", type: `${OWN}unknown-caller` },
  /**
   * An operator named a limit, or its key values, in a form the admin API cannot read: a name
   * that is not UTF-8, or `key` values that do not fit the limit's `by`.
   */
  bad_limit: { status: 400, title: "Bad Request", type: `${OWN}bad-limit` },
  /** No limit of that name in the running config (plans' limits and routes' `limits`). */
  unknown_limit: { status: 404, title: "Not Found", type: `${OWN}unknown-limit` },
  /** A usage query (`/admin/usage`) with a period, `by`, cursor or page size it cannot read. */
  bad_usage_query: { status: 400, title: "Bad Request", type: `${OWN}bad-usage-query` },
  /** Every usage export this instance serves at once is running: ask again once one ends. */
  exports_busy: { status: 429, title: "Too Many Requests", type: `${OWN}exports-busy` },
  /** POST /admin/keys (or a rotation) with a body it cannot use: the detail names the fix. */
  bad_key_request: { status: 400, title: "Bad Request", type: `${OWN}bad-key-request` },
  /** No stored key has that id (never issued, revoked, or expired). */
  unknown_key_id: { status: 404, title: "Not Found", type: `${OWN}unknown-key-id` },
  /**
   * A rotation of a key that a rotation already replaced (it lives out its grace): the detail
   * names the successor to rotate instead.
   */
  key_being_replaced: { status: 409, title: "Conflict", type: `${OWN}key-being-replaced` },
  /**
   * PUT /admin/overrides/… with a body or a caller and limit it cannot use (a size the limit's
   * algorithm refuses, no expires_in, a budget other callers share): the detail names the fix.
   */
  bad_override: { status: 400, title: "Bad Request", type: `${OWN}bad-override` },
  /** GET or DELETE of an override that is not there (never set, removed, or expired). */
  no_override: { status: 404, title: "Not Found", type: `${OWN}no-override` },
  /** POST /admin/reload refused the file; the previous config keeps serving. */
  config_refused: { status: 400, title: "Bad Request", type: `${OWN}config-refused` },
  /** An admin read or reset met a store that is down or refusing. */
  store_unavailable: { status: 503, title: "Service Unavailable", type: `${OWN}store-unavailable` },
} as const satisfies Record<string, { status: number; title: string; type: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

/** A problem's code (`quota_exceeded`, `body_too_large`), from its type URI. */
export function problemCode(problem: Problem): string {
  return (problem.type.split(/[/#]/).pop() ?? "").replaceAll("-", "_");
}

export function problemFor(code: ProblemCode, detail: string): Problem {
  const p = PROBLEMS[code];
  return { type: p.type, title: p.title, status: p.status, detail };
}

export function sendProblem(
  res: ServerResponse,
  problem: Problem,
  headers: Record<string, string | number> = {},
): void {
  const body = JSON.stringify(problem);
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // Copied, then extended property by property: a spread with extra keys in one literal takes
  // V8's slow path here (about 5 µs, the largest cost of a 429 in a flood).
  const out: Record<string, string | number> = Object.assign({}, headers);
  out["content-type"] = "application/problem+json";
  out["content-length"] = Buffer.byteLength(body);
  out["cache-control"] = "no-store";
  try {
    res.writeHead(problem.status, out);
  } catch {
    // A header the caller added cannot be sent (Node refuses characters outside Latin-1 and
    // controls). The config refuses such names, so this is a bug; it must cost the headers, not
    // the answer: a throw here would leave the client waiting.
    res.writeHead(problem.status, {
      "content-type": "application/problem+json",
      "content-length": Buffer.byteLength(body),
      "cache-control": "no-store",
    });
  }
  res.end(body);
}
