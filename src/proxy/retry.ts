// Which failed attempts say something about the target, and which requests may be sent again.
//
// undici calls a handler's onRequestStart once the request has a connection and just before its
// head is written: an error before it means the request never left the gateway (connection
// refused, connect timeout, DNS), whatever the method. After it the upstream may have acted on
// it, so only methods that are safe to repeat (RFC 9110 §9.2.2: GET, HEAD, OPTIONS, TRACE, PUT,
// DELETE) are sent again, and only when the body has not been read: it streams from the client
// and is not kept, so a body partly sent cannot be sent twice.

/** RFC 9110 §9.2.2. */
const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"]);

/**
 * Errors that say the target is unreachable or broke the exchange, by the reason passive health
 * logs. Not a timeout of the route (a slow answer is the route's deadline, not a dead target;
 * other routes of the upstream may allow it), not the client going away, not a refused body.
 */
const TARGET_FAILURES: Readonly<Record<string, string>> = {
  ECONNREFUSED: "refused",
  UND_ERR_CONNECT_TIMEOUT: "connect_timeout",
  ECONNRESET: "reset",
  UND_ERR_SOCKET: "reset",
  EPIPE: "reset",
  ENOTFOUND: "dns",
  EAI_AGAIN: "dns",
  EHOSTUNREACH: "unreachable",
  ENETUNREACH: "unreachable",
  ETIMEDOUT: "connect_timeout",
};

/** The reason `err` counts against its target, or null when it does not. */
export function targetFailure(err: unknown): string | null {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === "string" ? (TARGET_FAILURES[code] ?? null) : null;
}

export interface FailedAttempt {
  method: string;
  /** onRequestStart was called: the request may have reached the upstream. */
  reached: boolean;
  /** Some of the request body was read (it cannot be sent again). */
  bodyRead: boolean;
  err: unknown;
}

/** Whether a failed attempt may be sent again, to another target. */
export function mayRetry(a: FailedAttempt): boolean {
  if (a.bodyRead || targetFailure(a.err) === null) return false;
  return !a.reached || IDEMPOTENT.has(a.method);
}
