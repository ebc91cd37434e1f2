// The errors the library surface throws, each with a stable `code` to branch on (the messages
// are for people and may change). Config files have their own, ConfigError (config/problems.ts).

export type TollgateErrorCode =
  | "TOLLGATE_INVALID_LIMIT"
  | "TOLLGATE_UNKNOWN_LIMIT"
  | "TOLLGATE_STORE_UNAVAILABLE"
  | "TOLLGATE_STORE_TIMEOUT"
  | "TOLLGATE_STORE_CONNECTION"
  | "TOLLGATE_STORE_SCRIPT"
  | "TOLLGATE_STORE_REPLICATION"
  | "TOLLGATE_BREAKER_OPEN";

/**
 * Every error below: `err instanceof TollgateError`, then switch on `err.code`. `status` is the
 * HTTP status the gateway answers when this error decides a request.
 */
export class TollgateError extends Error {
  readonly code: TollgateErrorCode;
  readonly status: number;
  constructor(code: TollgateErrorCode, message: string, options?: { cause?: unknown; status?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = "TollgateError";
    this.code = code;
    this.status = options?.status ?? 500;
  }
}

/** `createLimiter` was given a limit definition it cannot enforce. */
export class LimitDefinitionError extends TollgateError {
  /** The name of the limit in `limits`. */
  readonly limit: string;
  /** Each thing wrong with it, as "key: what is wrong" (or just "what is wrong"). */
  readonly problems: readonly string[];
  constructor(limit: string, problems: readonly string[]) {
    super("TOLLGATE_INVALID_LIMIT", `limit "${limit}": ${problems.join("; ")}`);
    this.name = "LimitDefinitionError";
    this.limit = limit;
    this.problems = problems;
  }
}

/** `check(key, { only })` named a limit the limiter was not created with. */
export class UnknownLimitError extends TollgateError {
  readonly limit: string;
  constructor(limit: string, hint: string | undefined) {
    super("TOLLGATE_UNKNOWN_LIMIT", `unknown limit "${limit}"${hint ? `; did you mean "${hint}"?` : ""}`);
    this.name = "UnknownLimitError";
    this.limit = limit;
  }
}

/** Why the store gave no answer: the labels of tollgate_store_errors_total. */
export type StoreUnavailableReason = "timeout" | "connection" | "script" | "replication" | "breaker_open";

/**
 * A store could not answer one call. Adapters turn their client's errors into one of these at
 * their boundary, so the reason is known by type, never guessed from a message.
 */
export abstract class StoreError extends TollgateError {
  abstract readonly reason: StoreUnavailableReason;
}

/** The store did not answer within store.timeout. */
export class StoreTimeoutError extends StoreError {
  readonly reason = "timeout";
  /** The timeout that ran out, for an operator's description (observability/store-errors.ts). */
  readonly ms: number;
  constructor(ms: number, cause?: unknown) {
    super("TOLLGATE_STORE_TIMEOUT", `the limit store did not answer within ${ms} ms`, { cause, status: 503 });
    this.name = "StoreTimeoutError";
    this.ms = ms;
  }
}

/** The store is not connected, or the connection failed during the call. */
export class StoreConnectionError extends StoreError {
  readonly reason = "connection";
  constructor(message: string, cause?: unknown) {
    super("TOLLGATE_STORE_CONNECTION", message, { cause, status: 503 });
    this.name = "StoreConnectionError";
  }
}

/** The store answered with an error, or with a reply the gateway cannot read. */
export class StoreReplyError extends StoreError {
  readonly reason = "script";
  constructor(message: string, cause?: unknown) {
    super("TOLLGATE_STORE_SCRIPT", message, { cause, status: 503 });
    this.name = "StoreReplyError";
  }
}

/**
 * store.replicas: fewer replicas than asked acknowledged a check's writes within the wait. The
 * decision exists on the master only, so a failover now could lose it: it is not given.
 */
export class StoreReplicationError extends StoreError {
  readonly reason = "replication";
  readonly acknowledged: number;
  readonly wanted: number;
  readonly waitMs: number;
  constructor(acknowledged: number, wanted: number, waitMs: number) {
    super(
      "TOLLGATE_STORE_REPLICATION",
      `${acknowledged} of the ${wanted} replicas asked for held the check's writes within ${waitMs} ms`,
      { status: 503 },
    );
    this.name = "StoreReplicationError";
    this.acknowledged = acknowledged;
    this.wanted = wanted;
    this.waitMs = waitMs;
  }
}

/** The circuit breaker in front of the store is open: the store was not asked. */
export class BreakerOpenError extends StoreError {
  readonly reason = "breaker_open";
  constructor() {
    super("TOLLGATE_BREAKER_OPEN", "the limit store's circuit breaker is open", { status: 503 });
    this.name = "BreakerOpenError";
  }
}

/** The one place a store failure gets its reason: anything not a StoreError is a lost connection. */
export function storeFailureReason(err: unknown): StoreUnavailableReason {
  return err instanceof StoreError ? err.reason : "connection";
}

const REASON_TEXT: Record<StoreUnavailableReason, string> = {
  timeout: "it did not answer in time",
  connection: "it is not connected",
  script: "it refused the limit script",
  replication: "its replicas did not confirm the decision in time",
  breaker_open: "its circuit breaker is open",
};

/**
 * The store could not decide (Redis down, too slow, or refusing the script). Nothing is known
 * about the limits: the caller chooses to let the work through (fail open) or not (fail closed).
 * The store's own error is `cause`.
 */
export class StoreUnavailableError extends TollgateError {
  readonly reason: StoreUnavailableReason;
  constructor(reason: StoreUnavailableReason, cause: unknown) {
    super("TOLLGATE_STORE_UNAVAILABLE", `the limit store could not answer: ${REASON_TEXT[reason]}`, {
      cause,
      status: 503,
    });
    this.name = "StoreUnavailableError";
    this.reason = reason;
  }
}
