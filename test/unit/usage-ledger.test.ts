// The usage ledger without Redis: the key layout and the periods a record counts in (a month
// boundary in UTC and in Europe/Berlin), what an entry may record (hostile tokens, unknown callers,
// a budget named twice), the commands one record sends (through a recording client), the index memo,
// and the in-process ledger with a fake clock (retention, its bound, paging).
import { Redis } from "ioredis";
import { describe, expect, it } from "vitest";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import { StoreConnectionError, StoreReplyError } from "../../src/errors.js";
import { createUsageLedger } from "../../src/usage/create-ledger.js";
import type { LedgerSettings, UsageEntry } from "../../src/usage/ledger.js";
import {
  callerTag,
  indexKey,
  labelKind,
  MAX_RECORDED_TOKENS,
  recordable,
  recordPeriods,
  reportOf,
  usageKey,
} from "../../src/usage/ledger-layout.js";
import { MemoryLedger, UsageLedgerFullError } from "../../src/usage/memory-ledger.js";
import { INDEX_MEMO_MS, IndexMemo, RedisLedger } from "../../src/usage/redis-ledger.js";

const DAY = 86_400_000;
const RETENTION = 90 * DAY;
/** 2026-11-30 23:30 UTC: still November in UTC, already 1 December 00:30 in Berlin. */
const BOUNDARY = Date.UTC(2026, 10, 30, 23, 30);
const utc: LedgerSettings = { prefix: "tg:", tz: "UTC", retentionMs: RETENTION };
const berlin: LedgerSettings = { prefix: "tg:", tz: "Europe/Berlin", retentionMs: RETENTION };

function entry(over: Partial<UsageEntry> = {}): UsageEntry {
  return {
    caller: "client:alice",
    tenant: "acme",
    limits: ["chat.monthly"],
    tokens: 100,
    atMs: BOUNDARY,
    ...over,
  };
}

describe("the key layout", () => {
  it("puts each caller's periods under its own hash tag, escaped as limit keys are", () => {
    expect(usageKey("tg:", "client:alice", "2026-12")).toBe("tg:{c:alice}:usage:2026-12");
    expect(usageKey("tg:", "tenant:acme", "2026-12-01")).toBe("tg:{t:acme}:usage:2026-12-01");
    expect(usageKey("tg:", "ip:192.0.2.1", "2026-12")).toBe("tg:{ip:192.0.2.1}:usage:2026-12");
    expect(usageKey("tg:", "ip:2001:db8::/64", "2026-12")).toBe("tg:{ip:2001:db8::/64}:usage:2026-12");
    // Braces and colons in an id cannot open another hash tag or forge a period.
    expect(callerTag("client:a}b{c:d")).toBe("c:a%7db%7bc%3ad");
    expect(callerTag("ip:not an ip}")).toBe("ip:not%20an%20ip%7d");
    // A long id is hashed: keys stay bounded.
    expect(callerTag(`client:${"x".repeat(200)}`)!.length).toBeLessThan(40);
    expect(usageKey("tg:", "bob", "2026-12")).toBeUndefined();
    expect(labelKind("user:bob")).toBeUndefined();
  });

  it("keeps a month's index sets, its days' included, in the month's slot", () => {
    expect(indexKey("tg:", "client", "2026-12")).toBe("tg:{usage:2026-12}:client");
    expect(indexKey("tg:", "tenant", "2026-12-01")).toBe("tg:{usage:2026-12}:tenant:2026-12-01");
  });

  it("counts a record in the month and the day of the ledger's zone, kept until their end plus the retention", () => {
    expect(recordPeriods(BOUNDARY, "UTC", RETENTION)).toEqual([
      { id: "2026-11", expiresAtMs: Date.UTC(2026, 11, 1) + RETENTION },
      { id: "2026-11-30", expiresAtMs: Date.UTC(2026, 11, 1) + RETENTION },
    ]);
    // Berlin is UTC+1 in winter: its December ends at 2026-12-31 23:00 UTC.
    expect(recordPeriods(BOUNDARY, "Europe/Berlin", RETENTION)).toEqual([
      { id: "2026-12", expiresAtMs: Date.UTC(2026, 11, 31, 23) + RETENTION },
      { id: "2026-12-01", expiresAtMs: Date.UTC(2026, 11, 1, 23) + RETENTION },
    ]);
    // A fraction of a ms in the retention cannot reach PEXPIREAT.
    expect(Number.isInteger(recordPeriods(BOUNDARY, "UTC", 1000.5)[0]!.expiresAtMs)).toBe(true);
  });
});

describe("what an entry records", () => {
  it("counts the caller and its tenant, each budget once", () => {
    expect(recordable(entry({ limits: ["a.x", "b.y", "a.x"] }))).toEqual({
      labels: ["client:alice", "tenant:acme"],
      limits: ["a.x", "b.y"],
      tokens: 100,
      usdMicros: 0,
      atMs: BOUNDARY,
      tenant: "acme",
    });
    expect(recordable(entry({ tenant: undefined, caller: "ip:192.0.2.1" }))).toMatchObject({
      labels: ["ip:192.0.2.1"],
    });
  });

  it("counts hostile token numbers as nothing, caps huge ones, and still counts the request", () => {
    const tokensOf = (tokens: number) => (recordable(entry({ tokens })) as { tokens: number }).tokens;
    expect([-5, Number.NaN, Number.POSITIVE_INFINITY, 0].map(tokensOf)).toEqual([0, 0, 0, 0]);
    expect(tokensOf(12.9)).toBe(12);
    expect(tokensOf(1e12)).toBe(MAX_RECORDED_TOKENS);
  });

  it("refuses a caller that is not an admin label, an instant that is not one, and a limit name that would break a field", () => {
    expect(recordable(entry({ caller: "alice" }))).toEqual({
      error: 'the caller "alice" is not client:<id>, tenant:<id> or ip:<address>',
    });
    expect(recordable(entry({ atMs: Number.NaN }))).toHaveProperty("error");
    expect(recordable(entry({ limits: ["a\tb", "ok.x", ""] }))).toMatchObject({ limits: ["ok.x"] });
  });

  it("reads a hash back by limit, sorted, ignoring fields it did not write", () => {
    expect(
      reportOf("client:alice", "2026-12", {
        "z.b\ttokens": "5",
        "z.b\trequests": "2",
        "a.a\trequests": "1",
        junk: "9",
        "a.a\tother": "3",
        "a.a\ttokens": "-4",
      }),
    ).toEqual({
      caller: "client:alice",
      period: "2026-12",
      limits: { "a.a": { tokens: 0, requests: 1 }, "z.b": { tokens: 5, requests: 2 } },
    });
  });
});

/** A standalone client whose pipelines are recorded and answered by `reply`. */
function recordingClient(reply: (commands: unknown[][]) => Promise<[Error | null, unknown][]>) {
  const sent: unknown[][][] = [];
  const client = Object.create(Redis.prototype) as Redis;
  Object.assign(client, {
    pipeline: (commands: unknown[][]) => {
      sent.push(commands);
      return { exec: () => reply(commands) };
    },
  });
  return { client, sent };
}

const ok = async (commands: unknown[][]) => commands.map((): [null, number] => [null, 1]);

describe("one Redis record", () => {
  it("is one pipeline: both periods of the caller and its tenant, their expiries, the index sets", async () => {
    const { client, sent } = recordingClient(ok);
    const ledger = new RedisLedger({ client, timeoutMs: 100, settings: () => berlin, now: () => 0 });
    await ledger.record(entry());
    expect(sent).toHaveLength(1);
    const month = Date.UTC(2026, 11, 31, 23) + RETENTION;
    const day = Date.UTC(2026, 11, 1, 23) + RETENTION;
    const hash = (caller: string, period: string, until: number) => [
      ["hincrby", `tg:{${caller}}:usage:${period}`, "chat.monthly\ttokens", 100],
      ["hincrby", `tg:{${caller}}:usage:${period}`, "chat.monthly\trequests", 1],
      // The client's hash says its tenant (the billing export's column); the tenant's does not.
      ...(caller === "c:alice" ? [["hset", `tg:{${caller}}:usage:${period}`, "tenant", "acme"]] : []),
      ["pexpireat", `tg:{${caller}}:usage:${period}`, until],
    ];
    const index = (key: string, label: string, until: number) => [
      ["sadd", key, label],
      ["pexpireat", key, until],
    ];
    expect(sent[0]).toEqual([
      ...hash("c:alice", "2026-12", month),
      ...index("tg:{usage:2026-12}:client", "client:alice", month),
      ...hash("c:alice", "2026-12-01", day),
      ...index("tg:{usage:2026-12}:client:2026-12-01", "client:alice", day),
      ...hash("t:acme", "2026-12", month),
      ...index("tg:{usage:2026-12}:tenant", "tenant:acme", month),
      ...hash("t:acme", "2026-12-01", day),
      ...index("tg:{usage:2026-12}:tenant:2026-12-01", "tenant:acme", day),
    ]);
  });

  it("adds a caller to an index once per INDEX_MEMO_MS, and again once a write failed", async () => {
    let fail = true;
    const { client, sent } = recordingClient(async (commands) =>
      fail ? commands.map((): [Error, null] => [new Error("READONLY You can't write"), null]) : ok(commands),
    );
    let now = 0;
    const errors: Error[] = [];
    const ledger = new RedisLedger({
      client,
      timeoutMs: 100,
      settings: () => utc,
      now: () => now,
      onError: (e) => errors.push(e),
    });
    const sadds = (i: number) => sent[i]!.filter((c) => c[0] === "sadd").length;
    await ledger.record(entry({ tenant: undefined }));
    expect(errors).toHaveLength(1);
    fail = false;
    await ledger.record(entry({ tenant: undefined }));
    await ledger.record(entry({ tenant: undefined }));
    expect([sadds(0), sadds(1), sadds(2)]).toEqual([2, 2, 0]);
    now += INDEX_MEMO_MS;
    await ledger.record(entry({ tenant: undefined }));
    expect(sadds(3)).toBe(2);
  });

  it("never rejects: a refused command or a lost connection goes to onError as a StoreError", async () => {
    const errors: Error[] = [];
    const refusing = recordingClient(async () => [[new Error("WRONGTYPE"), null]]);
    const ReplyError = (await import("ioredis")).ReplyError;
    const replying = recordingClient(async () => [[new ReplyError("WRONGTYPE Operation"), null]]);
    const down = recordingClient(() => Promise.reject(new Error("Connection is closed.")));
    for (const { client } of [refusing, replying, down]) {
      const ledger = new RedisLedger({
        client,
        timeoutMs: 100,
        settings: () => utc,
        onError: (e) => errors.push(e),
      });
      await expect(ledger.record(entry())).resolves.toBeUndefined();
    }
    expect(errors.map((e) => e.constructor)).toEqual([
      StoreConnectionError,
      StoreReplyError,
      StoreConnectionError,
    ]);
  });

  it("sends nothing for an entry without budgets, and reports an entry it cannot record", async () => {
    const { client, sent } = recordingClient(ok);
    const errors: Error[] = [];
    const ledger = new RedisLedger({
      client,
      timeoutMs: 100,
      settings: () => utc,
      onError: (e) => errors.push(e),
    });
    await ledger.record(entry({ limits: [] }));
    await ledger.record(entry({ caller: "nobody" }));
    expect(sent).toEqual([]);
    expect(errors.map((e) => e.message)).toEqual([
      'usage not recorded: the caller "nobody" is not client:<id>, tenant:<id> or ip:<address>',
    ]);
  });

  it("does not ask Redis for a period it cannot read", async () => {
    const { client } = recordingClient(ok);
    const ledger = new RedisLedger({ client, timeoutMs: 100, settings: () => utc });
    await expect(ledger.read("client:alice", "2026-13")).rejects.toThrow(
      '"2026-13" is not a period: write a month as YYYY-MM or a day as YYYY-MM-DD',
    );
  });
});

describe("the index memo", () => {
  it("forgets after its time and starts over past its size", () => {
    let now = 0;
    const memo = new IndexMemo(() => now, 1000, 2);
    memo.remember("k", "a");
    expect(memo.has("k", "a")).toBe(true);
    expect(memo.has("k", "b")).toBe(false);
    now = 1000;
    expect(memo.has("k", "a")).toBe(false);
    memo.remember("k", "a");
    memo.remember("k", "b");
    memo.remember("k", "c");
    expect([memo.has("k", "a"), memo.has("k", "b"), memo.has("k", "c")]).toEqual([false, false, true]);
  });
});

describe("the in-process ledger", () => {
  function memory(settings: LedgerSettings, options: { max?: number } = {}) {
    const clock = { now: BOUNDARY };
    const errors: Error[] = [];
    const ledger = new MemoryLedger({
      settings: () => settings,
      now: () => clock.now,
      maxTotals: options.max,
      onError: (e) => errors.push(e),
    });
    return { ledger, clock, errors };
  }

  it("sums a caller's requests and tokens per budget, and its tenant's over its clients", async () => {
    const { ledger } = memory(utc);
    await ledger.record(entry({ tokens: 100 }));
    await ledger.record(entry({ tokens: 50, limits: ["chat.monthly", "chat.daily"] }));
    await ledger.record(entry({ caller: "client:bob", tokens: 7 }));
    expect(await ledger.read("client:alice", "2026-11")).toEqual({
      caller: "client:alice",
      period: "2026-11",
      tenant: "acme",
      limits: { "chat.daily": { tokens: 50, requests: 1 }, "chat.monthly": { tokens: 150, requests: 2 } },
    });
    expect((await ledger.read("tenant:acme", "2026-11-30")).limits).toEqual({
      "chat.daily": { tokens: 50, requests: 1 },
      "chat.monthly": { tokens: 157, requests: 3 },
    });
    expect(await ledger.read("client:carol", "2026-11")).toEqual({
      caller: "client:carol",
      period: "2026-11",
      limits: {},
    });
    expect((await ledger.list("2026-11", "client")).map((r) => r.caller)).toEqual([
      "client:alice",
      "client:bob",
    ]);
    expect(await ledger.list("2026-11", "tenant")).toEqual([
      {
        caller: "tenant:acme",
        period: "2026-11",
        limits: { "chat.daily": { tokens: 50, requests: 1 }, "chat.monthly": { tokens: 157, requests: 3 } },
      },
    ]);
  });

  it("files the same instant under Berlin's December", async () => {
    const { ledger } = memory(berlin);
    await ledger.record(entry());
    expect((await ledger.read("client:alice", "2026-12")).limits).toEqual({
      "chat.monthly": { tokens: 100, requests: 1 },
    });
    expect((await ledger.read("client:alice", "2026-12-01")).limits).toHaveProperty("chat.monthly");
    expect((await ledger.read("client:alice", "2026-11")).limits).toEqual({});
  });

  it("lets a period go once its end plus the retention has passed, and records nothing already past it", async () => {
    const { ledger, clock } = memory({ ...utc, retentionMs: DAY });
    await ledger.record(entry());
    const dayEnd = Date.UTC(2026, 11, 1);
    clock.now = dayEnd + DAY - 1;
    expect((await ledger.read("client:alice", "2026-11-30")).limits).toHaveProperty("chat.monthly");
    clock.now = dayEnd + DAY;
    expect((await ledger.read("client:alice", "2026-11-30")).limits).toEqual({});
    // November as a month is kept as long, since it ends at the same instant.
    expect((await ledger.read("client:alice", "2026-11")).limits).toEqual({});
    await ledger.record(entry());
    expect((await ledger.read("client:alice", "2026-11")).limits).toEqual({});
  });

  it("holds at most maxTotals caller-periods: a new caller is dropped and reported, known ones keep counting", async () => {
    const { ledger, errors } = memory(utc, { max: 4 });
    await ledger.record(entry());
    await ledger.record(entry({ caller: "client:bob" }));
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(UsageLedgerFullError);
    await ledger.record(entry());
    expect((await ledger.read("client:alice", "2026-11")).limits["chat.monthly"]).toEqual({
      tokens: 200,
      requests: 2,
    });
  });

  it("takes no room for a record already past its retention", async () => {
    const { ledger, clock, errors } = memory({ ...utc, retentionMs: DAY }, { max: 2 });
    clock.now = BOUNDARY + 10 * DAY;
    for (const id of ["a", "b", "c"])
      await ledger.record(entry({ caller: `client:${id}`, tenant: undefined }));
    expect(errors).toEqual([]);
    await ledger.record(entry({ atMs: clock.now, tenant: undefined }));
    expect(errors).toEqual([]);
  });

  it("room is given back when a period goes", async () => {
    const { ledger, clock, errors } = memory({ ...utc, retentionMs: 0 }, { max: 4 });
    clock.now = BOUNDARY - 1;
    await ledger.record(entry());
    clock.now = Date.UTC(2026, 11, 1) + 60_000;
    await ledger.record(entry({ atMs: clock.now }));
    expect(errors).toEqual([]);
    expect((await ledger.read("tenant:acme", "2026-12")).limits).toHaveProperty("chat.monthly");
  });

  it("pages through a period's callers in order", async () => {
    const { ledger } = memory(utc);
    for (const id of ["d", "a", "c", "b", "e"]) await ledger.record(entry({ caller: `client:${id}` }));
    const first = await ledger.listPage("2026-11", "client", { limit: 2 });
    expect(first.callers.map((r) => r.caller)).toEqual(["client:a", "client:b"]);
    const second = await ledger.listPage("2026-11", "client", { cursor: first.next!, limit: 2 });
    const third = await ledger.listPage("2026-11", "client", { cursor: second.next!, limit: 2 });
    expect([...second.callers, ...third.callers].map((r) => r.caller)).toEqual([
      "client:c",
      "client:d",
      "client:e",
    ]);
    expect(third.next).toBeNull();
    await expect(ledger.listPage("2026-1", "client", { limit: 2 })).rejects.toThrow("is not a period");
  });

  it("is what the factory gives for a memory store", () => {
    expect(createUsageLedger({ kind: "memory" }, { settings: () => utc })).toBeInstanceOf(MemoryLedger);
  });
});

describe("usage.retention", () => {
  const base = `
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
routes: [{ name: chat, match: { path: / }, upstream: api }]
`;
  const load = (extra: string) => loadConfigText(base + extra, "gw.yaml", {});

  it("is 90 days unless written, and a duration when written", () => {
    const plain = load("");
    const written = load("usage: { retention: 30d }\n");
    expect(plain.ok && plain.config.usage.retention).toBe(RETENTION);
    expect(written.ok && written.config.usage.retention).toBe(30 * DAY);
  });

  it("is refused past ten years, or when it is not a duration, at its position", () => {
    const problems = (extra: string) => {
      const r = load(extra);
      return r.ok ? [] : r.problems.map(formatProblem);
    };
    expect(problems("usage: { retention: 4000d }\n")).toEqual([
      "gw.yaml:5:21: usage.retention: keep usage at most 3650d (ten years)",
    ]);
    expect(problems("usage: { retention: forever }\n")).toEqual([
      'gw.yaml:5:21: usage.retention: "forever" is not a duration; write it like 250ms, 5s, 15m, 1h or 1d',
    ]);
    expect(problems("usage: { keep: 1d }\n")[0]).toContain("usage");
  });
});
