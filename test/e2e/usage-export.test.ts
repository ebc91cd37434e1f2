// The billing export (issue 30) of a month with 100,000 callers in a real Redis, through a gateway
// process: streamed by the CLI to a file, in bounded memory (the gateway's RSS is sampled through
// the export, and while a client stops reading), and summing to /admin/usage's totals per tenant.
// The ledger is filled as gateways fill it (RedisLedger.record), 100 tenants of 1,000 clients.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp } from "node:fs/promises";
import { connect as netConnect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { connect, waitUntilReady } from "../../src/limits/stores/redis/connection.js";
import {
  indexKey,
  requestsField,
  TENANT_FIELD,
  tokensField,
  usageKey,
  usdField,
} from "../../src/usage/ledger-layout.js";
import { CLI, type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const TOKEN = "export-admin-token";
const CALLERS = 100_000;
const TENANTS = 100;
const AT = Date.UTC(2026, 10, 15, 12); // November 2026
const PERIOD = "2026-11";

/**
 * ARGV: first, last caller number, tenants, expiry, the 6 fields of pro.monthly and pro.requests,
 * the tenant field, then key templates (X: the id) and the two index sets. Caller n is
 * client:c<n, 6 digits> of tenant t<n % tenants>, on pro.monthly (and pro.requests when n is
 * odd), n % 997 tokens, and (n % 5000) + 1 micro-dollars unless n is a multiple of 3.
 */
const FILL = `
local first, last, tenants, exp = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local f = { { ARGV[5], ARGV[6], ARGV[7] }, { ARGV[8], ARGV[9], ARGV[10] } }
local tenantField, clientKey, tenantKey, clientIndex, tenantIndex = ARGV[11], ARGV[12], ARGV[13], ARGV[14], ARGV[15]
for n = first, last do
  local id = string.format('c%06d', n)
  local tenant = 't' .. (n % tenants)
  local keys = { (string.gsub(clientKey, 'X', id, 1)), (string.gsub(tenantKey, 'X', tenant, 1)) }
  local budgets = (n % 2 == 1) and 2 or 1
  for k = 1, 2 do
    local key = keys[k]
    for b = 1, budgets do
      if n % 997 > 0 then redis.call('HINCRBY', key, f[b][1], n % 997) end
      if n % 3 > 0 then redis.call('HINCRBY', key, f[b][2], (n % 5000) + 1) end
      redis.call('HINCRBY', key, f[b][3], 1)
    end
    redis.call('PEXPIREAT', key, exp)
  end
  redis.call('HSET', keys[1], tenantField, tenant)
  redis.call('SADD', clientIndex, 'client:' .. id)
  redis.call('SADD', tenantIndex, 'tenant:' .. tenant)
end
redis.call('PEXPIREAT', clientIndex, exp)
redis.call('PEXPIREAT', tenantIndex, exp)
return 1`;

let redis: RedisProcess;
let gw: GatewayProcess;

beforeAll(async () => {
  redis = await startRedis();
  const client = connect({ url: redis.url, timeoutMs: 5000 });
  await waitUntilReady(client, 5000);
  // The layout RedisLedger.record writes (test/unit/usage-ledger.test.ts pins it), written by a
  // script 10,000 callers at a time: a record per caller would take 25 s here, this a few.
  const started = performance.now();
  const expiresAt = AT + 3650 * 86_400_000;
  const fields = ["pro.monthly", "pro.requests"].map((l) => [tokensField(l), usdField(l), requestsField(l)]);
  for (let from = 0; from < CALLERS; from += 10_000)
    await client.eval(
      FILL,
      0,
      from,
      Math.min(CALLERS, from + 10_000) - 1,
      TENANTS,
      expiresAt,
      ...fields.flat(),
      TENANT_FIELD,
      usageKey("ex:", "client:X", PERIOD)!,
      usageKey("ex:", "tenant:X", PERIOD)!,
      indexKey("ex:", "client", PERIOD),
      indexKey("ex:", "tenant", PERIOD),
    );
  console.log(`usage export: ${CALLERS} callers written in ${Math.round(performance.now() - started)} ms`);
  client.disconnect();
  gw = await spawnGateway(
    `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, tokens: [{ name: billing, token: ${TOKEN}, scope: read }] }
log: { level: info }
store: { url: ${redis.url}, prefix: "ex:", timeout: 300ms }
usage: { retention: 3650d }
upstreams: { api: http://127.0.0.1:9 }
routes:
  - { name: chat, match: { path: / }, upstream: api }
`,
    // A heap too small to hold the month: an export that kept its callers would die of it.
    { NODE_OPTIONS: "--max-old-space-size=64 --max-semi-space-size=2" },
  );
}, 120_000);

afterAll(async () => {
  await gw?.stop();
  await redis?.stop();
});

function rssKb(pid: number): number {
  let status: string;
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    throw new Error(
      `the gateway exited during the export (out of memory?): ${gw.stderr.join("").slice(-2000)}`,
    );
  }
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN);
}

/** Samples the gateway's RSS every 20 ms while `work` runs: the peak, in KB. */
async function peakRss<T>(pid: number, work: () => Promise<T>): Promise<{ result: T; peakKb: number }> {
  let peakKb = rssKb(pid);
  const timer = setInterval(() => {
    try {
      peakKb = Math.max(peakKb, rssKb(pid));
    } catch {
      // Gone: the check after the work says so.
    }
  }, 20);
  try {
    const result = await work();
    return { result, peakKb: Math.max(peakKb, rssKb(pid)) };
  } finally {
    clearInterval(timer);
  }
}

function cli(args: string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      env: { ...process.env, TOLLGATE_ADMIN_URL: gw.adminUrl, TOLLGATE_ADMIN_TOKEN: TOKEN },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr!.on("data", (d: Buffer) => {
      stderr += d.toString();
    });
    child.on("exit", (code) => resolve({ code, stderr }));
  });
}

describe("the billing export of 100,000 callers", () => {
  it("streams every caller's rows in bounded memory, summing to /admin/usage's tenant totals", async () => {
    const pid = gw.child.pid!;
    const dir = await mkdtemp(join(tmpdir(), "tollgate-export-"));
    const file = join(dir, "usage.csv");
    const before = rssKb(pid);
    const { result, peakKb } = await peakRss(pid, () =>
      cli(["usage", "export", "--period", PERIOD, "--output", file]),
    );
    expect(result).toEqual({ code: 0, stderr: "" });
    const lines = readFileSync(file, "utf8").split("\r\n");
    expect(lines[0]).toBe("period,tenant,caller,budget,requests,tokens,usd");
    expect(lines.at(-1)).toBe("");
    const rows = lines.slice(1, -1).map((l) => l.split(","));
    expect(rows).toHaveLength(CALLERS * 1.5);
    expect(new Set(rows.map((r) => `${r[2]} ${r[3]}`)).size).toBe(rows.length);

    // Sums per tenant and budget against the admin API's own totals of each tenant.
    const sums = new Map<string, { requests: number; tokens: number; micros: number }>();
    for (const [, tenant, , budget, requests, tokens, usd] of rows) {
      const k = `${tenant} ${budget}`;
      const s = sums.get(k) ?? { requests: 0, tokens: 0, micros: 0 };
      s.requests += Number(requests);
      s.tokens += Number(tokens);
      if (usd) s.micros += Math.round(Number(usd) * 1e6);
      sums.set(k, s);
    }
    const admin = await send(gw.adminUrl, {
      path: `/admin/usage?period=${PERIOD}&by=tenant`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    const tenants = admin.json().callers as {
      caller: string;
      limits: Record<string, { requests: number; tokens: number; usd?: number }>;
    }[];
    expect(tenants).toHaveLength(TENANTS);
    let checked = 0;
    for (const t of tenants)
      for (const [budget, totals] of Object.entries(t.limits)) {
        const s = sums.get(`${t.caller.slice(7)} ${budget}`)!;
        expect({ requests: s.requests, tokens: s.tokens, micros: s.micros }).toEqual({
          requests: totals.requests,
          tokens: totals.tokens,
          micros: Math.round((totals.usd ?? 0) * 1e6),
        });
        checked++;
      }
    // Even tenants hold even callers only: one budget each; odd tenants two.
    expect(checked).toBe(TENANTS * 1.5);
    const grown = Math.round((peakKb - before) / 1024);
    console.log(
      `usage export: ${rows.length} rows, ${Math.round(readFileSync(file).length / 1e6)} MB; gateway RSS ${Math.round(before / 1024)} MB before, peak ${Math.round(peakKb / 1024)} MB (+${grown} MB)`,
    );
    // A page of 500 callers is a few hundred KB; 100,000 callers held at once would be >100 MB.
    expect(grown).toBeLessThan(40);
  }, 180_000);

  it("holds no more than a page for a client that stops reading, and lets go when it leaves", async () => {
    const pid = gw.child.pid!;
    const before = rssKb(pid);
    const port = Number(new URL(gw.adminUrl).port);
    const socket = netConnect(port, "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    socket.write(
      `GET /admin/usage/export?period=${PERIOD}&format=jsonl HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TOKEN}\r\n\r\n`,
    );
    let received = 0;
    socket.on("data", (d: Buffer) => {
      received += d.length;
      socket.pause();
    });
    await new Promise((r) => setTimeout(r, 3000));
    const paused = rssKb(pid);
    console.log(
      `usage export, client not reading: ${received} bytes taken, gateway RSS ${Math.round(before / 1024)} → ${Math.round(paused / 1024)} MB`,
    );
    expect((paused - before) / 1024).toBeLessThan(40);
    socket.destroy();
    // The gateway stops walking the ledger: it still answers at once.
    const health = await send(gw.adminUrl, { path: "/healthz" });
    expect(health.status).toBe(200);
  }, 30_000);

  it("cuts the response when the store fails mid-way: never a complete-looking file", async () => {
    const port = Number(new URL(gw.adminUrl).port);
    const socket = netConnect(port, "127.0.0.1");
    await new Promise((r) => socket.once("connect", r));
    socket.write(
      `GET /admin/usage/export?period=${PERIOD} HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TOKEN}\r\n\r\n`,
    );
    const chunks: Buffer[] = [];
    socket.once("data", (d: Buffer) => {
      chunks.push(d);
      socket.pause();
    });
    await new Promise((r) => setTimeout(r, 300));
    redis.pause();
    try {
      socket.on("data", (d: Buffer) => chunks.push(d));
      const closed = new Promise((r) => socket.once("close", r));
      socket.resume();
      await closed;
    } finally {
      redis.resume();
    }
    const text = Buffer.concat(chunks).toString("latin1");
    expect(text.startsWith("HTTP/1.1 200")).toBe(true);
    expect(text).toContain("period,tenant,caller,budget");
    // Chunked, and never its last chunk: any HTTP client sees the transfer broken.
    expect(text).toMatch(/transfer-encoding: chunked/i);
    expect(text.endsWith("\r\n0\r\n\r\n")).toBe(false);
    const cut = gw.lines.find((l) => String(l.msg).startsWith("usage export cut short"));
    expect(cut).toMatchObject({ period: PERIOD, format: "csv" });
    expect(Number(cut!.rows_sent)).toBeGreaterThan(0);
    expect(Number(cut!.rows_sent)).toBeLessThan(CALLERS * 1.5);
  }, 30_000);

  it("streams two exports at once and refuses a third with 429 exports-busy until one ends", async () => {
    const port = Number(new URL(gw.adminUrl).port);
    const stalled = await Promise.all(
      [0, 1].map(async () => {
        const socket = netConnect(port, "127.0.0.1");
        await new Promise((r) => socket.once("connect", r));
        socket.write(
          `GET /admin/usage/export?period=${PERIOD}&format=jsonl HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TOKEN}\r\n\r\n`,
        );
        await new Promise<void>((r) =>
          socket.once("data", () => {
            socket.pause();
            r();
          }),
        );
        return socket;
      }),
    );
    const third = await send(gw.adminUrl, {
      path: `/admin/usage/export?period=${PERIOD}`,
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(third.status).toBe(429);
    expect(third.headers["retry-after"]).toBe("5");
    expect(third.json()).toMatchObject({ type: expect.stringContaining("exports-busy") });
    for (const s of stalled) s.destroy();
    // A client that left frees its place.
    const deadline = Date.now() + 3000;
    let again = 429;
    while (again === 429 && Date.now() < deadline) {
      again = (
        await send(gw.adminUrl, {
          method: "HEAD",
          path: `/admin/usage/export?period=${PERIOD}`,
          headers: { authorization: `Bearer ${TOKEN}` },
        })
      ).status;
      if (again === 429) await new Promise((r) => setTimeout(r, 50));
    }
    expect(again).toBe(200);
  }, 30_000);

  it("refuses a parameter it does not take, or one given twice", async () => {
    for (const [query, fix] of [
      [`period=${PERIOD}&fromat=jsonl`, 'not "fromat"'],
      [`period=${PERIOD}&period=2026-01`, "period is given more than once"],
    ] as const) {
      const r = await send(gw.adminUrl, {
        path: `/admin/usage/export?${query}`,
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      expect(r.status).toBe(400);
      expect(r.json().detail).toContain(fix);
    }
  });

  it("refuses a bad period or format as a problem, and a CLI sees why", async () => {
    const bad = await send(gw.adminUrl, {
      path: "/admin/usage/export?period=2026-13",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(bad.status).toBe(400);
    expect(bad.json().detail).toContain("neither a month nor a day");
    const out = await cli(["usage", "export", "--period", PERIOD, "--format", "xml"]);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain('format "xml" is not csv or jsonl');
  });
});
