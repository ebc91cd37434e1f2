// The library surface (SPEC §5): named limits, checked for a key with a cost, without the proxy.
// Limits are written as in the YAML (`{ rate: "5/s", burst: 10 }`, `{ algorithm:
// "sliding_window", limit: 5, window: "15m" }`) and validated by the same schema.
import { checkLimit } from "../config/checks.js";
import { compileLimit } from "../config/compile.js";
import { limitSchema } from "../config/schema.js";
import { holdLeases, keyPart, leaseOf, nextLeaseId } from "./limiter.js";
import { type LimitSpec, quota } from "./spec.js";
import type { Store } from "./store.js";

export type LimitDefinition = Parameters<typeof limitSchema.parse>[0];

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
  store: Store;
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
  /** Decides every applicable limit for `key` atomically: if any denies, none is consumed. */
  check(key: string, options?: CheckOptions): Promise<LimiterDecision>;
}

export function createLimiter(options: CreateLimiterOptions): Limiter {
  const prefix = options.prefix ?? "tollgate:";
  const specs = new Map<string, LimitSpec>();
  for (const [name, definition] of Object.entries(options.limits)) {
    const parsed = limitSchema.safeParse(definition);
    if (!parsed.success) {
      throw new TypeError(
        `limit "${name}": ${parsed.error.issues.map((i) => `${i.path.join(".") || "limit"}: ${i.message}`).join("; ")}`,
      );
    }
    const problems: string[] = [];
    checkLimit([], parsed.data, (_path, message) => problems.push(message));
    if (problems.length) throw new TypeError(`limit "${name}": ${problems.join("; ")}`);
    const spec = compileLimit(name, parsed.data);
    if (spec) specs.set(name, spec);
  }

  return {
    async check(key, checkOptions = {}) {
      const cost = checkOptions.cost ?? 1;
      const names = checkOptions.only ?? [...specs.keys()];
      const checks = names.map((name) => {
        const spec = specs.get(name);
        if (!spec) throw new TypeError(`unknown limit "${name}"`);
        const limitKey = `${prefix}{${keyPart(key)}}:${name}`;
        return spec.algorithm === "concurrency"
          ? { key: limitKey, spec, cost, leaseId: nextLeaseId() }
          : { key: limitKey, spec, cost };
      });
      const decision = await options.store.check(checks);
      const limits = checks.map((c, i) => ({
        name: c.spec.name,
        limit: quota(c.spec),
        ...decision.outcomes[i]!,
      }));
      const tightest = [...limits].sort((a, b) => a.remaining - b.remaining || b.resetMs - a.resetMs)[0];
      if (decision.allowed) {
        const leases = checks.flatMap((c) => leaseOf(c) ?? []);
        const release = leases.length ? holdLeases(options.store, leases) : () => Promise.resolve();
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
