// The algorithm registry (src/limits/algorithms/): every entry whole and consistent with the
// rest, so a new algorithm that forgets a part fails here; and what each entry answers about a
// limit (its 429 wording, quota, window, local share, script arguments) pinned per algorithm.
import { describe, expect, it } from "vitest";
import { compileLimit } from "../../src/config/compile.js";
import { limitSchema } from "../../src/config/schema.js";
import type { LimitKey } from "../../src/limits/algorithms/algorithm.js";
import {
  ALGORITHM_KEYS,
  ALGORITHM_NAMES,
  ALGORITHMS,
  chargeStep,
  DEFAULT_ALGORITHM,
  isRateLimit,
  scriptCostArg,
} from "../../src/limits/algorithms/index.js";
import { compiledLimit } from "../../src/limits/compiled.js";
import {
  describeSpec,
  type LimitSpec,
  localSpec,
  quota,
  windowMs,
  windowSeconds,
} from "../../src/limits/spec.js";
import { CHECK_SCRIPT } from "../../src/limits/stores/redis/scripts.js";

const SPECS: Record<LimitSpec["algorithm"], LimitSpec> = {
  token_bucket: { algorithm: "token_bucket", name: "p.tb", burst: 10, intervalMs: 1000 },
  sliding_window: { algorithm: "sliding_window", name: "p.sw", limit: 5, windowMs: 900_000 },
  sliding_window_counter: {
    algorithm: "sliding_window_counter",
    name: "p.swc",
    limit: 100,
    windowMs: 60_000,
  },
  fixed_window: { algorithm: "fixed_window", name: "p.fw", limit: 7, windowMs: 3_600_000 },
  leaky_bucket: { algorithm: "leaky_bucket", name: "p.lb", queue: 3, intervalMs: 250 },
  concurrency: { algorithm: "concurrency", name: "p.c", maxInFlight: 4, leaseMs: 60_000 },
};

describe("the registry", () => {
  it("names every algorithm the schema accepts, in its order, the default among them", () => {
    expect(limitSchema.shape.algorithm.unwrap().options).toEqual(ALGORITHM_NAMES);
    expect(Object.keys(ALGORITHMS)).toEqual(ALGORITHM_NAMES);
    expect(ALGORITHM_NAMES).toContain(DEFAULT_ALGORITHM);
  });

  it("each entry needs only keys it takes, and a key several take is one definition", () => {
    for (const [name, { config }] of Object.entries(ALGORITHMS)) {
      for (const key of config.needs) expect(Object.keys(config.keys), `${name} needs ${key}`).toContain(key);
      for (const [key, definition] of Object.entries(config.keys)) {
        expect((ALGORITHM_KEYS as Record<string, LimitKey>)[key], `${name}.${key}`).toBe(definition);
      }
    }
  });

  it("the schema's limit holds exactly the algorithms' keys and the common ones", () => {
    expect(Object.keys(limitSchema.shape).sort()).toEqual(
      ["algorithm", "by", "shadow", "unit", "unlimited", ...Object.keys(ALGORITHM_KEYS)].sort(),
    );
  });

  it("composes each algorithm's Lua file once, after the prelude, in registry order", () => {
    const files = [...CHECK_SCRIPT.matchAll(/^-- (\w+\.lua)$/gm)].map((m) => m[1]);
    const algorithmFiles = [...new Set(Object.values(ALGORITHMS).map((a) => a.luaFile))];
    expect(files).toEqual(["prelude.lua", ...algorithmFiles, "check.lua"]);
    // leaky_bucket.lua reads token_bucket.lua's GCRA: composed after it.
    expect(files.indexOf("leaky_bucket.lua")).toBeGreaterThan(files.indexOf("token_bucket.lua"));
  });
});

describe("what each algorithm answers about a limit", () => {
  it.each([
    ["token_bucket", '"p.tb" allows 10 requests, refilled over 10s', 10, 10_000],
    ["sliding_window", '"p.sw" allows 5 requests per 15m', 5, 900_000],
    ["sliding_window_counter", '"p.swc" allows 100 requests per 1m', 100, 60_000],
    ["fixed_window", '"p.fw" allows 7 requests per 1h', 7, 3_600_000],
    ["leaky_bucket", '"p.lb" serves one request every 250ms and queues 3; the queue is full', 4, 1000],
    ["concurrency", '"p.c" allows 4 requests in flight at once', 4, 60_000],
  ] as const)("%s: its 429 wording, quota and window", (name, description, q, ms) => {
    const spec = SPECS[name];
    expect(describeSpec(spec)).toBe(description);
    expect(quota(spec)).toBe(q);
    expect(windowMs(spec)).toBe(ms);
    expect(windowSeconds(spec)).toBe(Math.max(1, Math.ceil(ms / 1000)));
    const local = localSpec(spec, 0.5);
    expect(compiledLimit(spec, 0.5)).toEqual({
      spec,
      description,
      quota: q,
      windowSeconds: windowSeconds(spec),
      // The local share is compiled too: what a 429 and the headers say while this instance
      // decides alone.
      local: {
        spec: local,
        description: describeSpec(local),
        quota: quota(local),
        windowSeconds: windowSeconds(local),
      },
    });
  });

  it("a calendar window: its period and zone, tokens or requests, and its nominal length for w=", () => {
    const monthly: LimitSpec = {
      algorithm: "fixed_window",
      name: "chat.monthly",
      limit: 100000,
      windowMs: 2_592_000_000,
      calendar: { unit: "month", tz: "UTC" },
      unit: "tokens",
    };
    expect(describeSpec(monthly)).toBe('"chat.monthly" allows 100000 tokens per calendar month (UTC)');
    expect(windowSeconds(monthly)).toBe(2_592_000);
    expect(quota(monthly)).toBe(100000);
    const daily: LimitSpec = {
      algorithm: "fixed_window",
      name: "p.daily",
      limit: 50,
      windowMs: 86_400_000,
      calendar: { unit: "day", tz: "Europe/Berlin" },
    };
    expect(describeSpec(daily)).toBe('"p.daily" allows 50 requests per calendar day (Europe/Berlin)');
    // The share one instance grants alone keeps the calendar.
    expect(localSpec(daily, 0.5)).toEqual({ ...daily, limit: 25 });
    // A rolling window that counts tokens keeps its wording.
    expect(describeSpec({ ...SPECS.fixed_window, unit: "tokens" })).toBe('"p.fw" allows 7 tokens per 1h');
  });

  it("the share one instance enforces alone: a fraction of the quota, at least 1 (a queue may be 0)", () => {
    expect(localSpec(SPECS.token_bucket, 0.25)).toEqual({
      ...SPECS.token_bucket,
      burst: 2,
      intervalMs: 4000,
    });
    expect(localSpec(SPECS.sliding_window, 0.1)).toEqual({ ...SPECS.sliding_window, limit: 1 });
    expect(localSpec(SPECS.fixed_window, 0.5)).toEqual({ ...SPECS.fixed_window, limit: 3 });
    expect(localSpec(SPECS.leaky_bucket, 0.25)).toEqual({
      ...SPECS.leaky_bucket,
      queue: 0,
      intervalMs: 1000,
    });
    expect(localSpec(SPECS.concurrency, 0.5)).toEqual({ ...SPECS.concurrency, maxInFlight: 2 });
  });

  it("its script arguments: code, two params, and the cost or what stands in for it", () => {
    const args = (spec: LimitSpec, extra: { leaseId?: string; batch?: number } = {}) => {
      const algorithm = ALGORITHMS[spec.algorithm];
      return [
        algorithm.code,
        ...algorithm.scriptParams(spec, 0),
        scriptCostArg({ key: "k", spec, cost: 2, ...extra }),
      ];
    };
    expect(args(SPECS.token_bucket)).toEqual([1, 10, 1000, 2]);
    expect(args(SPECS.token_bucket, { batch: 8 })).toEqual([1, 10, 1000, "2:8"]);
    expect(args(SPECS.fixed_window)).toEqual([2, 7, 3_600_000, 2]);
    expect(args(SPECS.sliding_window)).toEqual([3, 5, 900_000, 2]);
    expect(args(SPECS.sliding_window_counter)).toEqual([4, 100, 60_000, 2]);
    expect(args(SPECS.leaky_bucket)).toEqual([5, 4, 250, 2]);
    expect(args(SPECS.concurrency, { leaseId: "l1" })).toEqual([6, 4, 60_000, "l1"]);
    expect(args(SPECS.concurrency)).toEqual([6, 4, 60_000, ""]);
  });

  it("rate limits are charged past their quota; a concurrency limit holds a slot and is not", () => {
    for (const spec of Object.values(SPECS))
      expect(isRateLimit(spec), spec.name).toBe(spec !== SPECS.concurrency);
    const debt = chargeStep(null, 0, SPECS.token_bucket as never, 25);
    expect(debt.outcome.allowed).toBe(true);
    expect(debt.nextState).toBe(25_000);
    // The log keeps the newest `limit` units however many are charged.
    expect(chargeStep(null, 0, SPECS.sliding_window as never, 40).nextState).toHaveLength(5);
    expect(() => chargeStep(null, 0, SPECS.concurrency as never, 1)).toThrow(/cannot be charged/);
  });
});

describe("a limit as written, compiled by its algorithm", () => {
  const compile = (limit: unknown) => compileLimit("p.x", limitSchema.parse(limit));

  it.each([
    [
      { rate: "5/s", burst: 10 },
      { algorithm: "token_bucket", name: "p.x", burst: 10, intervalMs: 200 },
    ],
    [
      { limit: 100, window: "1h", batch: 20 },
      { algorithm: "token_bucket", name: "p.x", burst: 100, intervalMs: 36_000, batch: 20 },
    ],
    [
      { algorithm: "sliding_window", limit: 5, window: "15m" },
      { algorithm: "sliding_window", name: "p.x", limit: 5, windowMs: 900_000 },
    ],
    [
      { algorithm: "leaky_bucket", rate: "10/s", queue: 3 },
      { algorithm: "leaky_bucket", name: "p.x", queue: 3, intervalMs: 100 },
    ],
    [
      { algorithm: "concurrency", max_in_flight: 2 },
      { algorithm: "concurrency", name: "p.x", maxInFlight: 2, leaseMs: 60_000 },
    ],
    [
      { algorithm: "concurrency", max_in_flight: 2, lease: "5s", shadow: true },
      { algorithm: "concurrency", name: "p.x", maxInFlight: 2, leaseMs: 5000, shadow: true },
    ],
    // limit: 0 denies everything, whatever the algorithm that takes a limit.
    [{ limit: 0 }, { algorithm: "fixed_window", name: "p.x", limit: 0, windowMs: 3_600_000 }],
    [
      { algorithm: "sliding_window", limit: 0, window: "1m" },
      { algorithm: "fixed_window", name: "p.x", limit: 0, windowMs: 60_000 },
    ],
    // A calendar window, in UTC when compiled without a config.
    [
      { algorithm: "fixed_window", limit: 10, window: "1 month" },
      {
        algorithm: "fixed_window",
        name: "p.x",
        limit: 10,
        windowMs: 2_592_000_000,
        calendar: { unit: "month", tz: "UTC" },
      },
    ],
  ])("%j", (limit, spec) => {
    expect(compile(limit)).toEqual(spec);
  });

  it("unlimited: no spec", () => {
    expect(compile({ unlimited: true })).toBeNull();
  });
});
