// The usage ledger against a real redis-server and a real 3-master Redis Cluster, on connections
// made as the gateway makes them (stores/redis/connection.ts): records of several callers and
// tenants across a month boundary in UTC and in Europe/Berlin read back per caller, per tenant and
// listed; every key expiring at its period's end plus the retention; two instances summing into
// the same totals and a new ledger (a restarted gateway) reading them; paging through more
// callers than one SSCAN step; a Redis that is down never failing a record. Then the gateway's
// wiring: its ledger records under the config's prefix, zone and retention, /admin/usage reads
// it, and a lost record is counted in tollgate_store_errors_total.
import { Cluster, type Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { StoreConnectionError, StoreError } from "../../src/errors.js";
import { connect, waitUntilReady } from "../../src/limits/stores/redis/connection.js";
import { createUsageLedger } from "../../src/usage/create-ledger.js";
import type { LedgerSettings, UsageEntry, UsageLedger } from "../../src/usage/ledger.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { freePort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const DAY = 86_400_000;
const RETENTION = 90 * DAY;
const utc = (prefix: string): LedgerSettings => ({ prefix, tz: "UTC", retentionMs: RETENTION });
const berlin = (prefix: string): LedgerSettings => ({ prefix, tz: "Europe/Berlin", retentionMs: RETENTION });

/** Instants around 1 December 2026 (UTC+1 in Berlin). */
const NOV_30_1200 = Date.UTC(2026, 10, 30, 12);
const NOV_30_2230 = Date.UTC(2026, 10, 30, 22, 30);
const NOV_30_2330 = Date.UTC(2026, 10, 30, 23, 30);
const DEC_01_0030 = Date.UTC(2026, 11, 1, 0, 30);
const DEC_01_1000 = Date.UTC(2026, 11, 1, 10);

function entry(caller: string, tenant: string | undefined, limits: string[], tokens: number, atMs: number) {
  return { caller, tenant, limits, tokens, atMs } satisfies UsageEntry;
}

const names = (reports: { caller: string }[]) => reports.map((r) => r.caller);

interface Topology {
  /** A new connection, as a gateway instance opens one. */
  connection(): Promise<Redis | Cluster>;
  /** The test's own client, for looking at keys. */
  raw(): Redis | Cluster;
  /** Every key under a prefix (every master of a cluster). */
  keys(prefix: string): Promise<string[]>;
  /** The master serving a key (one server otherwise). */
  serverOf(key: string): Promise<number>;
}

function ledgerBehaviour(kind: string, topology: () => Topology) {
  const opened: (Redis | Cluster)[] = [];
  afterAll(() => {
    for (const c of opened) c.disconnect();
  });

  /** A ledger on its own connection, and the errors it reported. */
  async function instance(settings: LedgerSettings) {
    const client = await topology().connection();
    opened.push(client);
    const errors: Error[] = [];
    const ledger = createUsageLedger(
      { kind: "redis", client, timeoutMs: 2000 },
      { settings: () => settings, onError: (e) => errors.push(e) },
    );
    return { ledger, errors };
  }

  it(`${kind}: callers and tenants across a UTC month boundary, read per caller, per tenant and listed`, async () => {
    const { ledger, errors } = await instance(utc("u1:"));
    await Promise.all([
      ledger.record(entry("client:alice", "acme", ["chat.monthly"], 100, NOV_30_2330)),
      ledger.record(entry("client:alice", "acme", ["chat.monthly", "chat.daily"], 40, DEC_01_0030)),
      ledger.record(entry("client:bob", "acme", ["chat.monthly"], 7, DEC_01_0030)),
      ledger.record(entry("client:carol", "globex", ["chat.monthly"], 1, NOV_30_1200)),
      ledger.record(entry("ip:192.0.2.1", undefined, ["chat.monthly"], 0, DEC_01_1000)),
    ]);
    expect(errors).toEqual([]);
    expect(await ledger.read("client:alice", "2026-11")).toEqual({
      caller: "client:alice",
      period: "2026-11",
      tenant: "acme",
      limits: { "chat.monthly": { tokens: 100, requests: 1 } },
    });
    expect((await ledger.read("client:alice", "2026-12")).limits).toEqual({
      "chat.daily": { tokens: 40, requests: 1 },
      "chat.monthly": { tokens: 40, requests: 1 },
    });
    expect((await ledger.read("client:alice", "2026-11-30")).limits).toEqual({
      "chat.monthly": { tokens: 100, requests: 1 },
    });
    expect((await ledger.read("client:alice", "2026-12-01")).limits).toHaveProperty("chat.daily");
    expect((await ledger.read("tenant:acme", "2026-12")).limits).toEqual({
      "chat.daily": { tokens: 40, requests: 1 },
      "chat.monthly": { tokens: 47, requests: 2 },
    });
    expect((await ledger.read("tenant:acme", "2026-11")).limits).toEqual({
      "chat.monthly": { tokens: 100, requests: 1 },
    });
    expect((await ledger.read("ip:192.0.2.1", "2026-12-01")).limits).toEqual({
      "chat.monthly": { tokens: 0, requests: 1 },
    });
    expect(await ledger.read("client:nobody", "2026-12")).toEqual({
      caller: "client:nobody",
      period: "2026-12",
      limits: {},
    });
    expect(names(await ledger.list("2026-12", "client"))).toEqual([
      "client:alice",
      "client:bob",
      "ip:192.0.2.1",
    ]);
    expect(names(await ledger.list("2026-11", "client"))).toEqual(["client:alice", "client:carol"]);
    expect(await ledger.list("2026-11", "tenant")).toEqual([
      { caller: "tenant:acme", period: "2026-11", limits: { "chat.monthly": { tokens: 100, requests: 1 } } },
      { caller: "tenant:globex", period: "2026-11", limits: { "chat.monthly": { tokens: 1, requests: 1 } } },
    ]);
    expect(names(await ledger.list("2026-11-30", "tenant"))).toEqual(["tenant:acme", "tenant:globex"]);
    expect(names(await ledger.list("2026-12-01", "tenant"))).toEqual(["tenant:acme"]);
  });

  it(`${kind}: the same instants in Europe/Berlin fall on the other side of its month boundary`, async () => {
    const { ledger, errors } = await instance(berlin("u2:"));
    await ledger.record(entry("client:alice", "acme", ["chat.monthly"], 5, NOV_30_2230));
    await ledger.record(entry("client:alice", "acme", ["chat.monthly"], 11, NOV_30_2330));
    expect(errors).toEqual([]);
    expect((await ledger.read("client:alice", "2026-11")).limits).toEqual({
      "chat.monthly": { tokens: 5, requests: 1 },
    });
    expect((await ledger.read("client:alice", "2026-12")).limits).toEqual({
      "chat.monthly": { tokens: 11, requests: 1 },
    });
    expect((await ledger.read("tenant:acme", "2026-12-01")).limits).toEqual({
      "chat.monthly": { tokens: 11, requests: 1 },
    });
    expect((await ledger.read("tenant:acme", "2026-11-30")).limits).toEqual({
      "chat.monthly": { tokens: 5, requests: 1 },
    });
  });

  it(`${kind}: every key expires at its period's end plus the retention`, async () => {
    const raw = topology().raw();
    const expiry = async (key: string) => Number(await raw.call("PEXPIRETIME", key));
    const utcDec = Date.UTC(2027, 0, 1) + RETENTION;
    expect(await expiry("u1:{c:alice}:usage:2026-11")).toBe(Date.UTC(2026, 11, 1) + RETENTION);
    expect(await expiry("u1:{c:alice}:usage:2026-12")).toBe(utcDec);
    expect(await expiry("u1:{t:acme}:usage:2026-12-01")).toBe(Date.UTC(2026, 11, 2) + RETENTION);
    expect(await expiry("u1:{usage:2026-12}:client")).toBe(utcDec);
    expect(await expiry("u1:{usage:2026-12}:tenant:2026-12-01")).toBe(Date.UTC(2026, 11, 2) + RETENTION);
    // Berlin's December ends at 23:00 UTC on the 31st; its 1 December at 23:00 UTC that day.
    expect(await expiry("u2:{c:alice}:usage:2026-12")).toBe(Date.UTC(2026, 11, 31, 23) + RETENTION);
    expect(await expiry("u2:{usage:2026-12}:tenant:2026-12-01")).toBe(Date.UTC(2026, 11, 1, 23) + RETENTION);
    const keys = [...(await topology().keys("u1:")), ...(await topology().keys("u2:"))];
    // 5 callers and 2 tenants over their months and days, and the index sets.
    expect(keys.length).toBeGreaterThan(20);
    const expiries = await Promise.all(keys.map(expiry));
    expect(keys.filter((_, i) => !(expiries[i]! > Date.now()))).toEqual([]);
  });

  it(`${kind}: a record whose period is already past its retention leaves nothing`, async () => {
    const { ledger, errors } = await instance({ prefix: "u3:", tz: "UTC", retentionMs: DAY });
    await ledger.record(entry("client:old", "acme", ["chat.monthly"], 9, Date.UTC(2020, 0, 15)));
    expect(errors).toEqual([]);
    expect(await topology().keys("u3:")).toEqual([]);
    expect(await ledger.read("client:old", "2020-01")).toMatchObject({ limits: {} });
  });

  it(`${kind}: two instances sum into one total, and a restarted one reads it`, async () => {
    const a = await instance(utc("u4:"));
    const b = await instance(utc("u4:"));
    const records = (ledger: UsageLedger, tokens: number) =>
      Array.from({ length: 100 }, (_, i) =>
        ledger.record(entry(`client:c${i % 5}`, "acme", ["chat.monthly"], tokens, DEC_01_1000 + i)),
      );
    await Promise.all([...records(a.ledger, 3), ...records(b.ledger, 4)]);
    expect([...a.errors, ...b.errors]).toEqual([]);
    const restarted = await instance(utc("u4:"));
    for (const ledger of [a.ledger, restarted.ledger]) {
      expect((await ledger.read("tenant:acme", "2026-12")).limits).toEqual({
        "chat.monthly": { tokens: 700, requests: 200 },
      });
      expect((await ledger.read("client:c0", "2026-12-01")).limits).toEqual({
        "chat.monthly": { tokens: 140, requests: 40 },
      });
      expect(names(await ledger.list("2026-12", "client"))).toEqual(
        [0, 1, 2, 3, 4].map((i) => `client:c${i}`),
      );
    }
  });

  it(`${kind}: a record's keys span slots and masters, and no command crossed one`, async () => {
    const { ledger, errors } = await instance(utc("u5:"));
    const callers = Array.from({ length: 12 }, (_, i) => `client:spread-${i}`);
    await Promise.all(
      callers.map((c, i) => ledger.record(entry(c, `t${i}`, ["chat.monthly"], 1, DEC_01_1000))),
    );
    expect(errors).toEqual([]);
    const servers = new Set(
      await Promise.all(
        [...callers.map((c) => `u5:{c:${c.slice(7)}}:usage:2026-12`), "u5:{usage:2026-12}:client"].map((k) =>
          topology().serverOf(k),
        ),
      ),
    );
    expect(servers.size).toBe(kind === "cluster" ? 3 : 1);
    expect(names(await ledger.list("2026-12", "client"))).toEqual([...callers].sort());
    expect((await ledger.list("2026-12", "tenant")).length).toBe(12);
  });

  it(`${kind}: pages through more callers than one SSCAN step returns`, async () => {
    const { ledger, errors } = await instance(utc("u6:"));
    const callers = Array.from({ length: 300 }, (_, i) => `client:p${String(i).padStart(3, "0")}`);
    for (let i = 0; i < callers.length; i += 50)
      await Promise.all(
        callers.slice(i, i + 50).map((c) => ledger.record(entry(c, undefined, ["x.y"], 2, DEC_01_1000))),
      );
    expect(errors).toEqual([]);
    const seen = new Set<string>();
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await ledger.listPage("2026-12", "client", { cursor, limit: 50 });
      // SSCAN's COUNT is a hint: a page may hold a few more than asked, never hundreds.
      expect(page.callers.length).toBeLessThan(120);
      for (const r of page.callers) {
        expect(r.limits).toEqual({ "x.y": { tokens: 2, requests: 1 } });
        seen.add(r.caller);
      }
      cursor = page.next ?? undefined;
      pages++;
    } while (cursor !== undefined);
    expect(pages).toBeGreaterThan(2);
    expect([...seen].sort()).toEqual(callers);
    expect(names(await ledger.list("2026-12", "client"))).toEqual(callers);
  });
}

describe("usage ledger on a single Redis", () => {
  let redis: RedisProcess;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await redis.stop();
  });

  ledgerBehaviour("single", () => ({
    connection: async () => {
      const client = connect({ url: redis.url, timeoutMs: 1000 });
      await waitUntilReady(client, 5000);
      return client;
    },
    raw: () => redis.client,
    keys: (prefix) => redis.client.keys(`${prefix}*`),
    serverOf: async () => redis.port,
  }));

  it("single: a Redis that is down never fails a record; the error goes to onError, a read rejects", async () => {
    const client = connect({ url: `redis://127.0.0.1:${await freePort()}`, timeoutMs: 200 });
    const errors: Error[] = [];
    const ledger = createUsageLedger(
      { kind: "redis", client, timeoutMs: 200 },
      { settings: () => utc("down:"), onError: (e) => errors.push(e) },
    );
    try {
      await expect(
        ledger.record(entry("client:alice", "acme", ["a.b"], 1, DEC_01_1000)),
      ).resolves.toBeUndefined();
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(StoreConnectionError);
      await expect(ledger.read("client:alice", "2026-12")).rejects.toBeInstanceOf(StoreError);
    } finally {
      client.disconnect();
    }
  });
});

describe("usage ledger on a Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(async () => {
    await cluster.stop();
  });

  ledgerBehaviour("cluster", () => ({
    connection: async () => {
      const client = connect({ cluster: cluster.urls, timeoutMs: 1000 });
      await waitUntilReady(client, 5000);
      return client;
    },
    raw: () => cluster.client,
    keys: async (prefix) =>
      (await Promise.all(cluster.client.nodes("master").map((n) => n.keys(`${prefix}*`)))).flat(),
    serverOf: (key) => cluster.portOf(key),
  }));

  it("cluster: the test's client is a cluster (the behaviour above ran against one)", () => {
    expect(cluster.client).toBeInstanceOf(Cluster);
  });
});

describe("the gateway's ledger", () => {
  const TOKEN = "usage-admin-token-0123456789abcdef";
  let redis: RedisProcess;
  let upstream: TestUpstream;
  let gw: InProcessGateway | undefined;
  const config = (storeUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: warn }
store: { url: ${storeUrl}, prefix: "gw:", timeout: 200ms }
calendar: { tz: Europe/Berlin }
usage: { retention: 30d }
upstreams: { api: ${upstream.url} }
routes:
  - { name: chat, match: { path: / }, upstream: api }
`;
  const admin = (path: string) =>
    send(gw!.adminUrl, { path, headers: { authorization: `Bearer ${TOKEN}` } }).then((r) => ({
      status: r.status,
      body: r.json(),
    }));

  beforeAll(async () => {
    redis = await startRedis();
    upstream = await startUpstream();
  });
  afterAll(async () => {
    await gw?.stop();
    await upstream.close();
    await redis.stop();
  });

  it("records under the config's prefix, zone and retention, and /admin/usage reads it", async () => {
    gw = await startGateway(config(redis.url));
    const usage = gw.gateway.currentUsage;
    await usage.record(entry("client:alice", "acme", ["chat.monthly"], 12, NOV_30_2330));
    await usage.record(entry("client:bob", "acme", ["chat.monthly"], 30, DEC_01_1000));
    expect(await admin("/admin/usage/client:alice?period=2026-12")).toEqual({
      status: 200,
      body: {
        caller: "client:alice",
        period: "2026-12",
        tenant: "acme",
        limits: { "chat.monthly": { tokens: 12, requests: 1 } },
      },
    });
    expect(await admin("/admin/usage?period=2026-12&by=tenant")).toEqual({
      status: 200,
      body: {
        period: "2026-12",
        by: "tenant",
        callers: [
          {
            caller: "tenant:acme",
            period: "2026-12",
            limits: { "chat.monthly": { tokens: 42, requests: 2 } },
          },
        ],
        next_cursor: null,
      },
    });
    expect(Number(await redis.client.call("PEXPIRETIME", "gw:{c:alice}:usage:2026-12"))).toBe(
      Date.UTC(2026, 11, 31, 23) + 30 * DAY,
    );
    expect((await admin("/admin/usage?period=2026-12&by=org")).status).toBe(400);
    await gw.stop();
    gw = undefined;
  });

  for (const store of ["redis", "memory"] as const)
    it(`${store}: exports a period's rows as CSV and JSON Lines, a client's tenant in its column`, async () => {
      gw = await startGateway(
        config(store === "redis" ? redis.url : "memory://").replace('prefix: "gw:"', 'prefix: "gx:"'),
      );
      const usage = gw.gateway.currentUsage;
      await usage.record({
        ...entry("client:alice", "acme", ["chat.monthly"], 12, DEC_01_1000),
        usdMicros: 1_250_000,
      });
      await usage.record(entry("client:=bob", undefined, ["chat.monthly", "chat.daily"], 3, DEC_01_1000));
      await usage.record(entry("ip:192.0.2.1", undefined, ["chat.monthly"], 0, DEC_01_1000));
      const get = (q: string) =>
        send(gw!.adminUrl, {
          path: `/admin/usage/export?${q}`,
          headers: { authorization: `Bearer ${TOKEN}` },
        });
      const csv = await get("period=2026-12");
      expect(csv.status).toBe(200);
      expect(csv.headers["content-type"]).toBe("text/csv; charset=utf-8; header=present");
      expect(csv.headers["content-disposition"]).toBe('attachment; filename="usage-2026-12.csv"');
      expect(csv.body.split("\r\n").sort()).toEqual(
        [
          "",
          "period,tenant,caller,budget,requests,tokens,usd",
          "2026-12,,client:=bob,chat.daily,1,3,",
          "2026-12,,client:=bob,chat.monthly,1,3,",
          "2026-12,,ip:192.0.2.1,chat.monthly,1,0,",
          "2026-12,acme,client:alice,chat.monthly,1,12,1.250000",
        ].sort(),
      );
      const jsonl = await get("period=2026-12-01&format=jsonl&by=tenant");
      expect(jsonl.headers["content-type"]).toBe("application/jsonl; charset=utf-8");
      expect(
        jsonl.body
          .trimEnd()
          .split("\n")
          .map((l) => JSON.parse(l)),
      ).toEqual([
        {
          period: "2026-12-01",
          tenant: "acme",
          caller: "tenant:acme",
          budget: "chat.monthly",
          requests: 1,
          tokens: 12,
          usd: 1.25,
        },
      ]);
      expect((await get("period=2026-12&format=xlsx")).status).toBe(400);
      expect((await get("period=2026-12&by=org")).status).toBe(400);
      // A read token is enough; no token is not.
      expect((await send(gw.adminUrl, { path: "/admin/usage/export?period=2026-12" })).status).toBe(401);
      await gw.stop();
      gw = undefined;
    });

  it("counts a record lost to a store that is down in tollgate_store_errors_total, and logs it", async () => {
    gw = await startGateway(config(`redis://127.0.0.1:${await freePort()}`));
    const before = await storeErrors(gw);
    await gw.gateway.currentUsage.record(entry("client:alice", "acme", ["chat.monthly"], 12, DEC_01_1000));
    expect((await storeErrors(gw)) - before).toBe(1);
    expect(gw.logs.lines.filter((l) => l.msg === "usage not recorded")).toEqual([
      expect.objectContaining({ records_lost: 1, problem: expect.stringContaining("127.0.0.1") }),
    ]);
  });
});

/** tollgate_store_errors_total{reason="connection"} as /metrics says it. */
async function storeErrors(gw: InProcessGateway): Promise<number> {
  const text = (await send(gw.adminUrl, { path: "/metrics" })).body;
  const m = /^tollgate_store_errors_total\{reason="connection"\} (\d+)/m.exec(text);
  return Number(m?.[1] ?? 0);
}
