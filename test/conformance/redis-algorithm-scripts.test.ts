// The Lua entry scripts dispatch through the algorithm table (lua/prelude.lua), each limit to its
// algorithm's entry. Run directly: a refund gives back exactly what a check took, for every
// algorithm; a code no algorithm registered is refused by the deciding scripts (and skipped by
// the best-effort refund), never read as some other algorithm.
import { describe, expect, it } from "vitest";
import { ALGORITHMS } from "../../src/limits/algorithms/index.js";
import { periodAt } from "../../src/limits/calendar.js";
import type { LimitSpec } from "../../src/limits/spec.js";
import {
  CHARGE_SCRIPT,
  CHECK_SCRIPT,
  PEEK_SCRIPT,
  REFUND_SCRIPT,
} from "../../src/limits/stores/redis/scripts.js";
import { redisStores } from "../support/redis-stores.js";
import { freshKey } from "./suite.js";

const env = redisStores(1000);

const SPECS: LimitSpec[] = [
  { algorithm: "token_bucket", name: "t.tb", burst: 5, intervalMs: 1000 },
  { algorithm: "fixed_window", name: "t.fw", limit: 5, windowMs: 60_000 },
  { algorithm: "sliding_window", name: "t.sw", limit: 5, windowMs: 60_000 },
  { algorithm: "sliding_window_counter", name: "t.swc", limit: 5, windowMs: 60_000 },
  { algorithm: "leaky_bucket", name: "t.lb", queue: 4, intervalMs: 1000 },
  { algorithm: "concurrency", name: "t.c", maxInFlight: 5, leaseMs: 60_000 },
  {
    algorithm: "fixed_window",
    name: "t.fwc",
    limit: 5,
    windowMs: 86_400_000,
    calendar: { unit: "day", tz: "America/New_York" },
  },
];

/** A spec's name in a test's title: its algorithm, and whether it is a calendar window. */
const label = (spec: LimitSpec) =>
  "calendar" in spec && spec.calendar ? `${spec.algorithm} (calendar)` : spec.algorithm;

const evalScript = (script: string, keys: string[], args: (string | number)[]) =>
  env.redis.client.call("EVAL", script, keys.length, ...keys, ...args);

async function redisNow(): Promise<number> {
  const [seconds, micros] = await env.redis.client.time();
  return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
}

/** What a zero-cost check of `spec` sees at `now`: remaining. */
async function remaining(key: string, spec: LimitSpec, now: number): Promise<number> {
  const algorithm = ALGORITHMS[spec.algorithm];
  const reply = (await evalScript(
    PEEK_SCRIPT,
    [key],
    [now, algorithm.code, ...algorithm.scriptParams(spec, now)],
  )) as number[];
  return reply[0]!;
}

/** check.lua's ARGV for one request of one limit: no deadline, a one-spec table, its index. */
function checkArgs(
  now: number | string,
  code: number,
  p1: number,
  p2: number | string,
  cost: number | string,
): (number | string)[] {
  return [1, "", 1, code, p1, p2, now === "" ? 1 : `1@${now}`, cost === 1 ? 1 : `1|${cost}`];
}

describe("the scripts dispatch each limit to its algorithm", () => {
  it.each(SPECS.map((s) => [label(s), s] as const))(
    "%s: a refund gives back what a check took",
    async (_name, spec) => {
      const key = freshKey(spec.name);
      const algorithm = ALGORITHMS[spec.algorithm];
      const [p1, p2] = algorithm.scriptParams(spec, Date.now());
      const cost = spec.algorithm === "concurrency" ? "lease-1" : 2;
      const now = await redisNow();
      const full = await remaining(key, spec, now);
      const decided = (await evalScript(
        CHECK_SCRIPT,
        [key],
        checkArgs(now, algorithm.code, p1, p2, cost),
      )) as unknown[];
      expect(decided.slice(1, 4)).toEqual([1, 1, 1]);
      expect(await remaining(key, spec, now)).toBeLessThan(full);
      // ARGV[1]: "" for the Redis clock, then per limit.
      expect(await evalScript(REFUND_SCRIPT, [key], ["", now, algorithm.code, p1, p2, cost])).toBe(1);
      expect(await remaining(key, spec, now)).toBe(full);
    },
  );

  it("a refund skips a code it does not know and still gives back the others", async () => {
    const [unknown, bucket] = [freshKey("refund-unknown"), freshKey("refund-bucket")];
    const now = await redisNow();
    await evalScript(CHECK_SCRIPT, [bucket], checkArgs(now, 1, 5, 1000, 2));
    const given = await evalScript(
      REFUND_SCRIPT,
      [unknown, bucket],
      ["", now, 99, 5, 1000, 2, now, 1, 5, 1000, 2],
    );
    expect(given).toBe(1);
    expect(await env.redis.client.exists(bucket)).toBe(0);
  });

  it.each([
    ["check", CHECK_SCRIPT, (code: number) => checkArgs("", code, 5, 1000, 1)],
    ["charge", CHARGE_SCRIPT, (code: number) => ["", "", code, 5, 1000, 1]],
    ["peek", PEEK_SCRIPT, (code: number) => ["", code, 5, 1000]],
  ] as const)(
    "%s refuses a code no algorithm registered, shadow flag or not",
    async (_name, script, args) => {
      const key = freshKey("bad-code");
      await expect(evalScript(script, [key], [...args(99)])).rejects.toThrow("TOLLGATE_BAD_ALGORITHM 99");
      if (script === CHECK_SCRIPT) {
        await expect(evalScript(script, [key], [...args(99 + 16)])).rejects.toThrow(
          "TOLLGATE_BAD_ALGORITHM 115",
        );
      }
      expect(await env.redis.client.exists(key)).toBe(0);
    },
  );
});

describe("a key holding another algorithm's kind of state", () => {
  // A limit's algorithm changed on a reload, or a client override replaced it under the same
  // name: a string where a sorted set is read, or the reverse. Every check failed with WRONGTYPE
  // and was answered by the failure policy (open: unlimited, and the breaker opened for all).
  it.each(SPECS.map((s) => [label(s), s] as const))(
    "%s: checked and charged as a fresh limit, its key rewritten with its own kind",
    async (_name, spec) => {
      const algorithm = ALGORITHMS[spec.algorithm];
      const [p1, p2] = algorithm.scriptParams(spec, Date.now());
      const cost = spec.algorithm === "concurrency" ? "lease-1" : 2;
      const zsetState = spec.algorithm === "sliding_window" || spec.algorithm === "concurrency";
      const seed = async (key: string) => {
        if (zsetState) await env.redis.client.set(key, "12345");
        else await env.redis.client.zadd(key, 1, "stale");
      };
      const wrong = zsetState ? "string" : "zset";

      const checked = freshKey(spec.name);
      await seed(checked);
      const now = await redisNow();
      const decided = (await evalScript(
        CHECK_SCRIPT,
        [checked],
        checkArgs(now, algorithm.code, p1, p2, cost),
      )) as (string | number)[];
      // The reply's head, then the request: allowed, then the limit allowed.
      expect(decided.slice(1, 4)).toEqual([1, 1, 1]);
      expect(await env.redis.client.type(checked)).not.toBe(wrong);

      if (spec.algorithm === "concurrency") return; // a slot is not debited by a post-charge
      const charged = freshKey(spec.name);
      await seed(charged);
      const after = (await evalScript(CHARGE_SCRIPT, [charged], ["", "", algorithm.code, p1, p2, 2])) as (
        | string
        | number
      )[];
      expect(after.slice(0, 2)).toEqual([expect.any(String), 1]);
      expect(await env.redis.client.type(charged)).not.toBe(wrong);
    },
  );

  it("any other error of a step still fails the script", async () => {
    // A cost that is not a number is refused as before, not swallowed by the stale-state guard.
    const spec = SPECS[1]!;
    const algorithm = ALGORITHMS[spec.algorithm];
    const [p1, p2] = algorithm.scriptParams(spec, Date.now());
    await expect(
      evalScript(
        CHECK_SCRIPT,
        [freshKey(spec.name)],
        checkArgs(await redisNow(), algorithm.code, p1, p2, "x"),
      ),
    ).rejects.toThrow();
  });
});

describe("a calendar window decides at the script's own clock", () => {
  // The gateway sends the starts of four periods around its estimate of Redis's clock; the script
  // counts in the one that holds its own now, however far off the estimate (within a period).
  const spec: LimitSpec = {
    algorithm: "fixed_window",
    name: "t.cal",
    limit: 5,
    windowMs: 86_400_000,
    calendar: { unit: "day", tz: "Europe/Berlin" },
  };
  const algorithm = ALGORITHMS[spec.algorithm];

  it.each([
    ["20 hours behind", -20 * 3_600_000],
    ["exact", 0],
    ["20 hours ahead", 20 * 3_600_000],
  ])("an estimate %s: the period of Redis's TIME", async (_name, skewMs) => {
    const key = freshKey("cal-skew");
    const [p1, p2] = algorithm.scriptParams(spec, Date.now() + skewMs);
    // "" for now: the script reads Redis's clock.
    const decided = (await evalScript(CHECK_SCRIPT, [key], checkArgs("", algorithm.code, p1, p2, 1))) as (
      | string
      | number
    )[];
    const clock = Number(decided[0]);
    const { start, end } = periodAt(clock, "day", "Europe/Berlin");
    expect(decided.slice(1, 6)).toEqual([1, 1, 1, 4, Math.ceil(end - clock)]);
    expect(Number((await env.redis.client.get(key))!.split(" ")[0])).toBe(start);
  });

  it("period starts that do not reach its clock fail the script, which writes nothing", async () => {
    const key = freshKey("cal-range");
    const [p1, p2] = algorithm.scriptParams(spec, Date.now() - 5 * 86_400_000);
    await expect(evalScript(CHECK_SCRIPT, [key], checkArgs("", algorithm.code, p1, p2, 1))).rejects.toThrow(
      "TOLLGATE_CALENDAR_RANGE",
    );
    expect(await env.redis.client.exists(key)).toBe(0);
  });
});
