// The shared store: every decision is one EVALSHA of check.lua, so all gateway instances that
// point at the same Redis enforce one limit together.
//
// ioredis is set to fail fast: no offline queue and no per-request retries, so a dead Redis turns
// into an immediate rejection that the failure policy answers, never a request parked in a queue.
// Reconnection happens in the background with a capped backoff.
import { Redis, type RedisOptions } from "ioredis";
import { ALGORITHMS } from "../algorithms.js";
import type { LimitCheck, LimitOutcome, StoreDecision } from "../spec.js";
import type { Store } from "../store.js";
import { CHECK_SCRIPT } from "./scripts.js";

export interface RedisStoreOptions {
  url: string;
  /** Upper bound on one check, in ms (SPEC `store.timeout`). */
  timeoutMs: number;
  /** Called for connection-level errors (logged by the server, rate-limited there). */
  onError?: (err: Error) => void;
  /** Extra ioredis options, for tests. */
  redisOptions?: Partial<RedisOptions>;
}

/** The narrow slice of the client this store uses: the defined script command. */
type CheckCommand = (numKeys: number, ...args: (string | number)[]) => Promise<unknown>;

export const MAX_RECONNECT_DELAY_MS = 2000;

export class RedisStore implements Store {
  readonly kind = "redis";
  readonly client: Redis;
  private readonly runCheck: CheckCommand;
  private readonly timeoutMs: number;

  constructor(options: RedisStoreOptions) {
    this.timeoutMs = options.timeoutMs;
    this.client = new Redis(options.url, {
      enableAutoPipelining: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: options.timeoutMs,
      connectTimeout: Math.max(1000, options.timeoutMs * 10),
      // Reconnect forever, quickly at first, never slower than every 2 s.
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), MAX_RECONNECT_DELAY_MS),
      ...options.redisOptions,
    });
    this.client.on("error", (err: Error) => options.onError?.(err));
    // defineCommand runs EVALSHA and falls back to EVAL on NOSCRIPT (a restarted or failed-over
    // Redis has an empty script cache), so the script is loaded once per server, not per call.
    this.client.defineCommand("tollgateCheck", { lua: CHECK_SCRIPT });
    this.runCheck = (this.client as unknown as { tollgateCheck: CheckCommand }).tollgateCheck.bind(
      this.client,
    );
  }

  async check(checks: readonly LimitCheck[], nowMs?: number): Promise<StoreDecision> {
    const args: (string | number)[] = [];
    for (const c of checks) args.push(c.key);
    args.push(nowMs === undefined ? "" : nowMs);
    for (const c of checks) {
      const algorithm = ALGORITHMS[c.spec.algorithm];
      const [p1, p2] = algorithm.scriptParams(c.spec);
      args.push(algorithm.code, p1, p2, c.cost);
    }
    // ioredis starts commandTimeout only when a command is written, and auto-pipelining holds a
    // slot's next batch until the running one settles: behind a hung batch, a check would wait
    // up to twice the timeout. The deadline therefore starts here, when the request asks.
    return new Promise<StoreDecision>((resolve, reject) => {
      const timer = setTimeout(() => reject(new StoreTimeoutError(this.timeoutMs)), this.timeoutMs);
      this.runCheck(checks.length, ...args).then(
        (reply) => {
          clearTimeout(timer);
          try {
            resolve(parseCheckReply(reply, checks.length));
          } catch (err) {
            reject(err);
          }
        },
        (err: unknown) => {
          clearTimeout(timer);
          reject(err);
        },
      );
    });
  }

  async ping(): Promise<void> {
    await this.client.ping();
  }

  isConnected(): boolean {
    return this.client.status === "ready";
  }

  /**
   * Resolves true once connected, or false after `timeoutMs`. Start-up waits on it briefly so
   * the first requests are not degraded by a connection still being set up; it never blocks on
   * a Redis that is down.
   */
  async waitUntilReady(timeoutMs: number): Promise<boolean> {
    if (this.isConnected()) return true;
    return new Promise((resolve) => {
      const done = (ready: boolean) => {
        clearTimeout(timer);
        this.client.off("ready", onReady);
        resolve(ready);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      this.client.once("ready", onReady);
    });
  }

  async close(): Promise<void> {
    this.client.disconnect();
  }
}

export class StoreTimeoutError extends Error {
  constructor(ms: number) {
    super(`the limit store did not answer within ${ms} ms`);
    this.name = "StoreTimeoutError";
  }
}

export class StoreReplyError extends Error {
  constructor(message: string) {
    super(`unexpected reply from check.lua: ${message}`);
    this.name = "StoreReplyError";
  }
}

/** Shape-checks the script's reply rather than trusting a cast: a wrong reply must not allow. */
export function parseCheckReply(reply: unknown, limits: number): StoreDecision {
  if (!Array.isArray(reply) || reply.length !== 1 + limits * 4) {
    throw new StoreReplyError(`expected an array of ${1 + limits * 4} integers`);
  }
  for (const v of reply) if (typeof v !== "number") throw new StoreReplyError("expected integers");
  const values = reply as number[];
  const outcomes: LimitOutcome[] = [];
  for (let i = 0; i < limits; i++) {
    const at = 1 + i * 4;
    outcomes.push({
      allowed: values[at] === 1,
      remaining: values[at + 1]!,
      resetMs: values[at + 2]!,
      retryAfterMs: values[at + 3]!,
    });
  }
  return { allowed: values[0] === 1, outcomes };
}
