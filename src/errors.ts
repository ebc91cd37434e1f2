// The errors the library surface throws, each with a stable `code` to branch on (the messages
// are for people and may change). Config files have their own, ConfigError (config/problems.ts).

export type TollgateErrorCode =
  | "TOLLGATE_INVALID_LIMIT"
  | "TOLLGATE_UNKNOWN_LIMIT"
  | "TOLLGATE_STORE_UNAVAILABLE";

/** Every error below: `err instanceof TollgateError`, then switch on `err.code`. */
export class TollgateError extends Error {
  readonly code: TollgateErrorCode;
  constructor(code: TollgateErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "TollgateError";
    this.code = code;
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

/** Why the store gave no answer. */
export type StoreUnavailableReason = "timeout" | "connection" | "script" | "breaker_open";

const REASON_TEXT: Record<StoreUnavailableReason, string> = {
  timeout: "it did not answer in time",
  connection: "it is not connected",
  script: "it refused the limit script",
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
    });
    this.name = "StoreUnavailableError";
    this.reason = reason;
  }
}
