// The library surface (SPEC §5): named limits, checked for a key with a cost, without the proxy.
// Limits are written as in the YAML (`{ rate: "5/s", burst: 10 }`, `{ algorithm:
// "sliding_window", limit: 5, window: "15m" }`), typed per algorithm below and validated at run
// time by the same schema and checks as the config file.
import type { z } from "zod";
import { checkLimit } from "../config/checks.js";
import { compileLimit } from "../config/compile.js";
import { suggest } from "../config/problems.js";
import { limitSchema } from "../config/schema.js";
import {
  LimitDefinitionError,
  StoreUnavailableError,
  storeFailureReason,
  UnknownLimitError,
} from "../errors.js";
import type { DurationString, LimitCommon } from "./algorithms/algorithm.js";
import { type AlgorithmLimitDefinition, isRateLimit } from "./algorithms/index.js";
import { holdLeases, leaseOf, nextLeaseId } from "./leases.js";
import { type LimitCheck, type LimitSpec, quota, type StoreDecision } from "./spec.js";
import { libraryLimitKey } from "./state-keys.js";
import type { LimitStore } from "./stores/contract.js";

// Each algorithm's definition shapes are its own (algorithms/); the library names them here.
export type { CalendarWindowString, DurationString, RateString } from "./algorithms/algorithm.js";
export type {
  ConcurrencyLimit,
  LeakyBucketLimit,
  TokenBucketLimit,
  TokenBucketQuotaLimit,
  WindowLimit,
} from "./algorithms/index.js";

/** `limit: 0`: every check is denied; no window needed. */
export interface DenyAllLimit extends LimitCommon {
  /** Any algorithm that takes `limit`. */
  algorithm?: Extract<AlgorithmLimitDefinition, { limit: number }>["algorithm"];
  limit: 0;
  window?: DurationString;
}

/** Never limited: checks always allow it (a placeholder in a table of limits). */
export interface UnlimitedLimit {
  unlimited: true;
}

/** One limit, in the shapes of the YAML's limits, one per algorithm. */
export type LimitDefinition = AlgorithmLimitDefinition | DenyAllLimit | UnlimitedLimit;

// The type above must stay a shape the schema accepts: a definition that type-checks parses.
type SchemaInput = z.input<typeof limitSchema>;
type Accepted<T extends SchemaInput> = T;
type _FitsTheSchema = Accepted<LimitDefinition>;

const LIMIT_KEYS = Object.keys(limitSchema.shape);
const ALGORITHMS = limitSchema.shape.algorithm.unwrap().options;

function didYouMean(word: string, known: readonly string[]): string {
  const hint = suggest(word, known);
  if (hint) return `; did you mean "${hint}"?`;
  return `; expected one of: ${known.join(", ")}`;
}

/** What is wrong with a definition, in the words of `tollgate --check`. */
function definitionProblems(definition: unknown): {
  problems: string[];
  parsed?: z.output<typeof limitSchema>;
} {
  const parsed = limitSchema.safeParse(definition);
  if (!parsed.success) {
    return {
      problems: parsed.error.issues.flatMap((issue) => {
        const at = issue.path.map(String).join(".");
        if (issue.code === "unrecognized_keys") {
          return issue.keys.map((key) => `unknown key "${key}"${didYouMean(key, LIMIT_KEYS)}`);
        }
        if (issue.code === "invalid_type" && at === "") {
          return [`expected a limit such as { rate: "5/s", burst: 10 }, not ${describe(definition)}`];
        }
        if (issue.code === "invalid_value" && at === "algorithm") {
          const given = (definition as { algorithm?: unknown }).algorithm;
          return [
            `algorithm: ${JSON.stringify(given)} is not an algorithm${didYouMean(String(given), ALGORITHMS)}`,
          ];
        }
        return [`${at || "limit"}: ${issue.message}`];
      }),
    };
  }
  const problems: string[] = [];
  checkLimit([], parsed.data, (_path, message) => problems.push(message));
  return { problems, parsed: parsed.data };
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? JSON.stringify(value) : `${typeof value} ${String(value)}`;
}

export interface LimitResult {
  name: string;
  allowed: boolean;
  limit: number;
  remaining: number;
  resetMs: number;
  retryAfterMs: number;
}

export type LimiterDecision =
  | {
      allowed: true;
      remaining: number;
      resetMs: number;
      limit: string;
      limits: LimitResult[];
      /** Leaky bucket: wait this long before doing the work (0: go now). */
      delayMs: number;
      /**
       * Concurrency limits: gives the slots back. Call it once the work ends, however it ends;
       * a slot not given back frees itself after the limit's lease.
       */
      release: () => Promise<void>;
    }
  | {
      allowed: false;
      remaining: number;
      resetMs: number;
      retryAfterMs: number;
      /** The limit that denied (the longest wait when several did). */
      limit: string;
      violated: string[];
      limits: LimitResult[];
    };

export interface CreateLimiterOptions {
  /** A MemoryStore (one process) or a RedisStore (shared); the caller closes it when done. */
  store: LimitStore;
  /** Limits by name; the name appears in decisions and store keys. */
  limits: Record<string, LimitDefinition>;
  /** Key prefix in the store (default "tollgate:"). */
  prefix?: string;
}

export interface CheckOptions {
  /** Units this call takes (default 1). */
  cost?: number;
  /** Which of the limits apply (default: all). */
  only?: readonly string[];
}

export interface Limiter {
  /**
   * Decides every applicable limit for `key` atomically: if any denies, none is consumed.
   * Rejects with StoreUnavailableError (`code` "TOLLGATE_STORE_UNAVAILABLE", the store's error
   * as `cause`) when the store cannot answer, and UnknownLimitError for a name not in `limits`.
   */
  check(key: string, options?: CheckOptions): Promise<LimiterDecision>;
}

const noRelease = () => Promise.resolve();

export function createLimiter(options: CreateLimiterOptions): Limiter {
  const prefix = options.prefix ?? "tollgate:";
  const specs = new Map<string, LimitSpec>();
  for (const [name, definition] of Object.entries(options.limits)) {
    const { problems, parsed } = definitionProblems(definition);
    if (problems.length || !parsed) throw new LimitDefinitionError(name, problems);
    const spec = compileLimit(name, parsed);
    if (spec) specs.set(name, spec);
  }
  const defined = Object.keys(options.limits);
  const unavailable = (err: unknown) => new StoreUnavailableError(storeFailureReason(err), err);

  return {
    async check(key, checkOptions = {}) {
      const cost = checkOptions.cost ?? 1;
      const names = checkOptions.only ?? [...specs.keys()];
      const checks: LimitCheck[] = [];
      for (const name of names) {
        const spec = specs.get(name);
        if (!spec) {
          if (defined.includes(name)) continue; // unlimited: true
          throw new UnknownLimitError(name, suggest(name, defined));
        }
        const limitKey = libraryLimitKey(prefix, key, name);
        checks.push(
          !isRateLimit(spec)
            ? { key: limitKey, spec, cost, leaseId: nextLeaseId() }
            : { key: limitKey, spec, cost },
        );
      }
      let decision: StoreDecision;
      try {
        decision = await options.store.check(checks);
      } catch (err) {
        throw unavailable(err);
      }
      const limits = checks.map((c, i) => ({
        name: c.spec.name,
        limit: quota(c.spec),
        ...decision.outcomes[i]!,
      }));
      const tightest = [...limits].sort((a, b) => a.remaining - b.remaining || b.resetMs - a.resetMs)[0];
      if (decision.allowed) {
        const leases = checks.flatMap((c) => leaseOf(c) ?? []);
        const held = leases.length ? holdLeases(options.store, leases) : undefined;
        const release = held
          ? () =>
              held().catch((err: unknown) => {
                throw unavailable(err);
              })
          : noRelease;
        return {
          allowed: true,
          delayMs: Math.max(0, ...decision.outcomes.map((o) => o.delayMs ?? 0)),
          release,
          remaining: tightest?.remaining ?? Infinity,
          resetMs: tightest?.resetMs ?? 0,
          limit: tightest?.name ?? "",
          limits,
        };
      }
      const violated = limits.filter((l) => !l.allowed).sort((a, b) => b.retryAfterMs - a.retryAfterMs);
      return {
        allowed: false,
        remaining: violated[0]!.remaining,
        resetMs: violated[0]!.resetMs,
        retryAfterMs: violated[0]!.retryAfterMs,
        limit: violated[0]!.name,
        violated: violated.map((v) => v.name),
        limits,
      };
    },
  };
}
