// The audit log without Redis: the entry's shape, the in-process ring's bounds and retention, what
// the Redis log sends and how it reads a reply (a fake client), that a write never throws, and
// GET /admin/audit through the admin handler.
import { describe, expect, it } from "vitest";
import { auditLimit } from "../../src/admin/endpoints/audit.js";
import { type AdminDeps, createAdminHandler } from "../../src/admin/server.js";
import { StoreError, StoreReplyError } from "../../src/errors.js";
import { PROBLEMS } from "../../src/http/problem.js";
import type { Store } from "../../src/limits/stores/contract.js";
import { Metrics } from "../../src/observability/metrics.js";
import {
  AUDIT_FIELD_MAX,
  type AuditLog,
  auditKey,
  createAuditLog,
  parseEntries,
  RedisAuditLog,
  RingAuditLog,
} from "../../src/operator-state/audit.js";
import { fakeRequest, fakeResponse, NOW, runtimeOf } from "./support/proxy-fakes.js";

const DAY = 86_400_000;
const settings = () => ({ prefix: "tg:", retentionMs: 30 * DAY });

function ring(options: { ringEntries?: number; now?: () => number; onError?: (err: Error) => void } = {}) {
  return new RingAuditLog({ settings, now: () => NOW, ...options });
}

describe("an audit entry", () => {
  it("is { time, token, action, target }, the time RFC 3339 in UTC", async () => {
    const log = ring();
    await log.write({ token: "ops", action: "DELETE /admin/callers", target: "client:acme" });
    const [entry] = await log.list(10);
    expect(entry).toEqual({
      time: "2030-01-01T00:00:00.000Z",
      token: "ops",
      action: "DELETE /admin/callers",
      target: "client:acme",
    });
    expect(Object.keys(entry!)).toEqual(["time", "token", "action", "target"]);
    expect(entry!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
  });

  it("keeps at most AUDIT_FIELD_MAX characters of each field, marking the cut", async () => {
    const log = ring();
    await log.write({ token: "ops", action: "DELETE /admin/limits", target: "x".repeat(10_000) });
    const [entry] = await log.list(1);
    expect(entry!.target).toHaveLength(AUDIT_FIELD_MAX);
    expect(entry!.target.endsWith("…")).toBe(true);
  });

  it("lives in the {rt} slot under the store's prefix", () => {
    expect(auditKey("tollgate:")).toBe("tollgate:{rt}:audit");
  });
});

describe("the in-process ring (memory://)", () => {
  it("lists newest first, up to the limit asked", async () => {
    let now = NOW;
    const log = ring({ now: () => now });
    for (let i = 0; i < 5; i++) {
      await log.write({ token: "ops", action: "a", target: `t${i}` });
      now += 1000;
    }
    expect((await log.list(3)).map((e) => e.target)).toEqual(["t4", "t3", "t2"]);
    expect((await log.list(100)).map((e) => e.target)).toEqual(["t4", "t3", "t2", "t1", "t0"]);
  });

  it("holds at most its size: the oldest entries make room", async () => {
    const log = ring({ ringEntries: 3 });
    for (let i = 0; i < 10; i++) await log.write({ token: "ops", action: "a", target: `t${i}` });
    expect(log.held).toBe(3);
    expect((await log.list(100)).map((e) => e.target)).toEqual(["t9", "t8", "t7"]);
    for (let i = 10; i < 1000; i++) await log.write({ token: "ops", action: "a", target: `t${i}` });
    expect(log.held).toBe(3);
    expect((await log.list(100)).map((e) => e.target)).toEqual(["t999", "t998", "t997"]);
  });

  it("never lists an entry older than the retention", async () => {
    let now = NOW;
    const log = ring({ now: () => now });
    await log.write({ token: "ops", action: "a", target: "old" });
    now += 20 * DAY;
    await log.write({ token: "ops", action: "a", target: "new" });
    expect((await log.list(10)).map((e) => e.target)).toEqual(["new", "old"]);
    now += 10 * DAY + 1;
    expect((await log.list(10)).map((e) => e.target)).toEqual(["new"]);
    now += 20 * DAY;
    expect(await log.list(10)).toEqual([]);
  });

  it("a write never throws, even when the clock and the report both do", async () => {
    const reported: Error[] = [];
    const broken = ring({
      now: () => {
        throw new Error("no clock");
      },
      onError: (err) => {
        reported.push(err);
        throw new Error("the report failed too");
      },
    });
    await expect(broken.write({ token: "ops", action: "a", target: "t" })).resolves.toBeUndefined();
    expect(reported.map((e) => e.message)).toEqual(["no clock"]);
  });

  it("is what createAuditLog gives for memory://", () => {
    expect(createAuditLog({ kind: "memory" }, { settings })).toBeInstanceOf(RingAuditLog);
  });
});

/** A client whose pipeline records its commands and answers `results` (or rejects with `fail`). */
function fakeRedis(answer: { results?: [Error | null, unknown][]; fail?: Error; range?: unknown } = {}) {
  const sent: unknown[][] = [];
  const record =
    (name: string) =>
    (...args: unknown[]) => {
      sent.push([name, ...args]);
      return pipeline;
    };
  const pipeline = {
    xadd: record("xadd"),
    xtrim: record("xtrim"),
    pexpire: record("pexpire"),
    exec: async () => {
      if (answer.fail) throw answer.fail;
      return answer.results ?? [];
    },
  };
  const client = {
    pipeline: () => pipeline,
    xrevrange: async (...args: unknown[]) => {
      sent.push(["xrevrange", ...args]);
      return answer.range ?? [];
    },
  };
  return { sent, client: client as never };
}

describe("the Redis log", () => {
  it("appends with XADD MINID ~ (now − retention), bounds with XTRIM MAXLEN ~, expires the stream", async () => {
    const { sent, client } = fakeRedis();
    const log = new RedisAuditLog(client, 100, { settings, now: () => NOW });
    await log.write({ token: "ops", action: "POST /admin/reload", target: "gw.yaml" });
    expect(sent).toEqual([
      [
        "xadd",
        "tg:{rt}:audit",
        "MINID",
        "~",
        NOW - 30 * DAY,
        "*",
        "token",
        "ops",
        "action",
        "POST /admin/reload",
        "target",
        "gw.yaml",
      ],
      ["xtrim", "tg:{rt}:audit", "MAXLEN", "~", 100_000],
      ["pexpire", "tg:{rt}:audit", 30 * DAY],
    ]);
  });

  it("reads newest first, no older than the retention, at most `limit`", async () => {
    const { sent, client } = fakeRedis({
      range: [["1893456000123-0", ["token", "ops", "action", "a", "target", "t"]]],
    });
    const log = new RedisAuditLog(client, 100, { settings, now: () => NOW });
    expect(await log.list(5)).toEqual([
      { time: "2030-01-01T00:00:00.123Z", token: "ops", action: "a", target: "t" },
    ]);
    expect(sent).toEqual([["xrevrange", "tg:{rt}:audit", "+", String(NOW - 30 * DAY), "COUNT", 5]]);
  });

  it("a write the store refuses or cannot take resolves, reported as a StoreError", async () => {
    for (const answer of [
      { fail: new Error("connect ECONNREFUSED 127.0.0.1:6390") },
      { results: [[new Error("ERR wrong type"), null]] as [Error | null, unknown][] },
    ]) {
      const reported: Error[] = [];
      const { client } = fakeRedis(answer);
      const log = new RedisAuditLog(client, 100, {
        settings,
        now: () => NOW,
        onError: (e) => reported.push(e),
      });
      await expect(log.write({ token: "ops", action: "a", target: "t" })).resolves.toBeUndefined();
      expect(reported).toHaveLength(1);
      expect(reported[0]).toBeInstanceOf(StoreError);
    }
  });

  it("a client that throws before it returns a promise is reported, not thrown", async () => {
    const reported: Error[] = [];
    const client = {
      pipeline: () => {
        throw new Error("closed");
      },
    } as never;
    const log = new RedisAuditLog(client, 100, { settings, onError: (e) => reported.push(e) });
    await expect(log.write({ token: "ops", action: "a", target: "t" })).resolves.toBeUndefined();
    expect(reported.map((e) => e.message)).toEqual(["closed"]);
  });
});

describe("parseEntries", () => {
  it("takes the time from the stream id and the three fields; ignores unknown fields", () => {
    expect(
      parseEntries([
        ["1893456000000-3", ["token", "ops", "action", "a", "target", "t", "extra", "x"]],
        ["1893456000000-2", ["token", "ops"]],
      ]),
    ).toEqual([
      { time: "2030-01-01T00:00:00.000Z", token: "ops", action: "a", target: "t" },
      { time: "2030-01-01T00:00:00.000Z", token: "ops", action: "", target: "" },
    ]);
  });

  it.each([
    ["not a list", "OK"],
    ["an entry that is not [id, fields]", [["1-0"]]],
    ["an id that is not a stream id", [["abc", []]]],
  ])("refuses %s as a StoreReplyError", (_what, reply) => {
    expect(() => parseEntries(reply)).toThrow(StoreReplyError);
  });
});

describe("GET /admin/audit", () => {
  it("limit: 100 by default, a whole number from 1 to 1000, else refused", () => {
    expect(auditLimit(null)).toBe(100);
    expect(auditLimit("1")).toBe(1);
    expect(auditLimit("1000")).toBe(1000);
    for (const bad of ["0", "1001", "-1", "2.5", "ten", "", " 5", "1e3", "99999999999"])
      expect(auditLimit(bad), bad).toBeNull();
  });

  const OPS = "ops-token-0123456789abcdef";
  const VIEWER = "viewer-token-0123456789abcdef";
  const rt = runtimeOf(`
store: { url: "memory://" }
upstreams: { api: "http://127.0.0.1:1" }
admin:
  tokens:
    - { name: ops, token: ${OPS}, scope: write }
    - { name: viewer, token: ${VIEWER}, scope: read }
routes: [{ name: default, match: { path: /api }, upstream: api }]
`);
  const handler = (audit?: AuditLog) =>
    createAdminHandler({
      runtime: () => rt,
      store: () => ({}) as Store,
      limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
      metrics: new Metrics(),
      reload: async () => ({ ok: true, version: "v", changed: false, restartRequired: [] }),
      describeStoreError: () => "limit store unreachable at 10.0.0.1:6379 (connection refused)",
      ...(audit ? { audit } : {}),
    } satisfies AdminDeps);
  const ask = async (admin: ReturnType<typeof handler>, method: string, url: string, token: string) => {
    const res = fakeResponse();
    const headers: [string, string][] = [
      ["host", "admin"],
      ["authorization", `Bearer ${token}`],
    ];
    await admin(fakeRequest({ method, url, headers }), res);
    return res;
  };

  it("lists each write by its token's name, to a read token, newest first", async () => {
    const admin = handler(ring());
    await ask(admin, "POST", "/admin/reload", OPS);
    await ask(admin, "POST", "/admin/reload", OPS);
    const res = await ask(admin, "GET", "/admin/audit?limit=1", VIEWER);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      entries: [
        { time: "2030-01-01T00:00:00.000Z", token: "ops", action: "POST /admin/reload", target: "gw.yaml" },
      ],
    });
    expect((await ask(admin, "GET", "/admin/audit", VIEWER)).json().entries).toHaveLength(2);
    expect(res.body).not.toContain(OPS);
  });

  it("an in-process ring when the gateway gives none", async () => {
    const admin = handler();
    await ask(admin, "POST", "/admin/reload", OPS);
    expect((await ask(admin, "GET", "/admin/audit", OPS)).json()).toMatchObject({
      entries: [{ token: "ops", action: "POST /admin/reload" }],
    });
  });

  it("400 bad-audit-query for a limit it cannot read; 503 when the store cannot answer", async () => {
    const bad = await ask(handler(ring()), "GET", "/admin/audit?limit=all", VIEWER);
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({
      type: PROBLEMS.bad_audit_query.type,
      detail: "limit is a whole number from 1 to 1000",
    });
    const down: AuditLog = { write: async () => {}, list: () => Promise.reject(new Error("ECONNREFUSED")) };
    const res = await ask(handler(down), "GET", "/admin/audit", VIEWER);
    expect(res.statusCode).toBe(503);
    expect(res.json()).toMatchObject({
      type: PROBLEMS.store_unavailable.type,
      detail: "limit store unreachable at 10.0.0.1:6379 (connection refused)",
    });
  });
});
