// The adapter's way out: every call bounded by the store timeout, and every error of the client
// turned into a StoreError (src/errors.ts) here, so that nobody past this file reads a Redis
// client's message to learn why a call failed.
import { ReplyError } from "ioredis";
import { withDeadline, withDeadlineAt } from "../../../deadline.js";
import { StoreConnectionError, StoreError, StoreReplyError, StoreTimeoutError } from "../../../errors.js";
import { localNow } from "./clock.js";

/**
 * The StoreError for what the client rejected a call with: Redis's own error reply is a
 * StoreReplyError, the client's command timer a StoreTimeoutError, anything else (not connected,
 * connection lost, no cluster node reachable) a StoreConnectionError. The original is `cause`.
 */
export function toStoreError(err: unknown, timeoutMs: number): StoreError {
  if (err instanceof StoreError) return err;
  if (err instanceof ReplyError) return new StoreReplyError(`Redis refused the call: ${messageOf(err)}`, err);
  const message = messageOf(err);
  // ioredis' commandTimeout rejects with a plain Error("Command timed out"): its message is all
  // there is to know it by.
  if (/timed out|timeout/i.test(message)) return new StoreTimeoutError(timeoutMs, err);
  return new StoreConnectionError(`the limit store is unreachable: ${message}`, err);
}

function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/** Deadlines and error types for every call of one store. */
export class Boundary {
  constructor(readonly timeoutMs: number) {}

  timeout(): StoreTimeoutError {
    return new StoreTimeoutError(this.timeoutMs);
  }

  toStoreError(err: unknown): StoreError {
    return toStoreError(err, this.timeoutMs);
  }

  /** Rethrows what a call rejected with as a StoreError. */
  readonly rethrow = (err: unknown): never => {
    throw toStoreError(err, this.timeoutMs);
  };

  /** `work`, or a StoreTimeoutError once the store timeout has passed. */
  bounded<T>(work: Promise<T>): Promise<T> {
    return withDeadline(work.catch(this.rethrow), this.timeoutMs, () => this.timeout());
  }

  /**
   * `work`, or a StoreTimeoutError once the local clock has passed `deadline` (re-armed like a
   * batch's, so never before it: a script given that deadline has given up by then).
   */
  boundedUntil<T>(deadline: number, work: Promise<T>): Promise<T> {
    return withDeadlineAt(work.catch(this.rethrow), deadline, localNow, () => this.timeout());
  }
}
