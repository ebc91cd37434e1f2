// Budget alerts delivered (issue 30), as operators run them: two gateway processes sharing one
// real Redis, a calendar budget of 10 requests with thresholds at 50 %, 80 % and 100 %, and a
// receiver that fails its first three deliveries. The instance that queued the first event is
// killed (SIGKILL, mid-retry) and started again; every event must still reach the webhook and
// the tenant's own URL exactly once, signed with each one's secret.
import { createHmac } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, metricValue, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { type Received, startUpstream, type TestUpstream } from "../support/upstream.js";

const ADMIN_TOKEN = "alerts-admin-token";
const HOOK_SECRET = "whsec-billing-0123456789abcdef";
const ACME_SECRET = "whsec-acme-0123456789abcdef";

const config = (redisUrl: string, upstreamUrl: string, receiverUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${ADMIN_TOKEN} }
log: { level: info, requests: false }
store: { url: ${redisUrl}, prefix: "al:", timeout: 500ms }
upstreams:
  api: ${upstreamUrl}
routes:
  - { name: chat, match: { path: /v1 }, upstream: api }
plans:
  pro:
    routes:
      chat: { algorithm: fixed_window, limit: 10, window: 1 month }
clients:
  - { id: alice, key: alice-key, plan: pro, tenant: acme }
alerts:
  thresholds: [50%, 80%, 100%]
  webhooks:
    - { name: billing, url: "${receiverUrl}/hook?token=url-secret", secret: "\${HOOK_SECRET}" }
  retry: { first: 300ms, max_delay: 1s }
tenants:
  acme: { alert_url: "${receiverUrl}/acme", alert_secret: "\${ACME_SECRET}", alert_events: [budget.exhausted] }
`;

let redis: RedisProcess;
let upstream: TestUpstream;
let receiver: TestUpstream;
let yaml: string;
let a: GatewayProcess;
let b: GatewayProcess;
/** Deliveries the receiver has answered, in order; the first three with a 500. */
let answered = 0;
const env = { HOOK_SECRET, ACME_SECRET };

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  receiver = await startUpstream();
  receiver.handle = (_req, res) => {
    answered++;
    res.writeHead(answered <= 3 ? 500 : 204).end();
  };
  yaml = config(redis.url, upstream.url, receiver.url);
  [a, b] = await Promise.all([spawnGateway(yaml, env), spawnGateway(yaml, env)]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await receiver?.close();
  await upstream?.close();
  await redis?.stop();
});

const call = (gw: GatewayProcess) =>
  send(gw.url, { path: "/v1/chat", headers: { "x-api-key": "alice-key" } });

async function until<T>(what: string, probe: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = probe();
    if (v !== undefined) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function verify(r: Received, secret: string): Record<string, unknown> {
  const header = String(r.headers["tollgate-signature"]);
  const m = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header);
  expect(m, header).not.toBeNull();
  expect(Math.abs(Number(m![1]) - Date.now() / 1000)).toBeLessThan(60);
  expect(m![2]).toBe(createHmac("sha256", secret).update(`${m![1]}.${r.body}`).digest("hex"));
  expect(r.headers["content-type"]).toBe("application/json");
  const body = JSON.parse(r.body) as Record<string, unknown>;
  expect(r.headers["tollgate-event"]).toBe(body.event);
  return body;
}

describe("budget alerts across two instances and a restart", () => {
  it("delivers each event exactly once per receiver after its failures, signed, whoever queued it", async () => {
    // 5 of 10 through A: the 50 % event is queued by A and its first delivery fails.
    for (let i = 0; i < 5; i++) expect((await call(a)).status).toBe(200);
    await until("the first delivery", () => (receiver.received.length >= 1 ? true : undefined));
    // A dies mid-retry; B, and A started again, take the queue over.
    await a.stop("SIGKILL");
    a = await spawnGateway(yaml, env);
    // 3 more (80 %) and 2 more (100 %: threshold and exhausted), across both; then refusals.
    for (const gw of [b, a, b, a, b]) expect((await call(gw)).status).toBe(200);
    for (const gw of [a, b, a]) expect((await call(gw)).status).toBe(429);

    const expected = { hook: 4, acme: 1 }; // 50, 80, 100 % and exhausted; the tenant takes exhausted only
    const succeeded = () => receiver.received.slice(3);
    await until("every event delivered", () =>
      succeeded().length >= expected.hook + expected.acme ? true : undefined,
    );
    // Nothing more comes: no event twice, no retry of one that was delivered.
    await new Promise((r) => setTimeout(r, 2500));
    expect(receiver.received).toHaveLength(3 + expected.hook + expected.acme);

    const hook = receiver.received.filter((r) => r.url.startsWith("/hook"));
    const acme = receiver.received.filter((r) => r.url === "/acme");
    const ok = (list: Received[]) => list.filter((r) => receiver.received.indexOf(r) >= 3);
    const hookBodies = ok(hook).map((r) => verify(r, HOOK_SECRET));
    const acmeBodies = ok(acme).map((r) => verify(r, ACME_SECRET));
    // The failed tries were signed too, with the same body as their retry.
    for (const r of receiver.received.slice(0, 3)) verify(r, r.url === "/acme" ? ACME_SECRET : HOOK_SECRET);
    const failedIds = receiver.received.slice(0, 3).map((r) => JSON.parse(r.body).id);
    const deliveredIds = [...hookBodies, ...acmeBodies].map((body) => body.id);
    for (const id of failedIds) expect(deliveredIds).toContain(id);

    const key = (b: Record<string, unknown>) => `${b.event} ${b.threshold}`;
    expect(hookBodies.map(key).sort()).toEqual([
      "budget.exhausted 1",
      "budget.threshold 0.5",
      "budget.threshold 0.8",
      "budget.threshold 1",
    ]);
    expect(new Set(hookBodies.map((x) => x.id)).size).toBe(4);
    expect(acmeBodies.map(key)).toEqual(["budget.exhausted 1"]);
    // The tenant's copy of an event is the same event: the same id as the webhook's.
    expect(acmeBodies[0]!.id).toBe(hookBodies.find((x) => x.event === "budget.exhausted")!.id);
    const period = new Date().toISOString().slice(0, 7);
    expect(hookBodies.find((x) => x.threshold === 0.5)).toMatchObject({
      caller: "client:alice",
      tenant: "acme",
      limit: "pro.chat",
      period,
      unit: "requests",
      used: 5,
      quota: 10,
    });
    expect(hookBodies.find((x) => x.event === "budget.exhausted")).toMatchObject({ used: 10, quota: 10 });

    // What each instance counted: raised once in all, sent once per delivery, three retries.
    const sum = async (re: RegExp) =>
      (await Promise.all([a, b].map((g) => metricValue(g.adminUrl, re)))).reduce(
        (s, v) => s + (Number.isNaN(v) ? 0 : v),
        0,
      );
    expect(await sum(/^tollgate_alert_deliveries_total\{target="billing",result="sent"\} (\d+)/m)).toBe(
      expected.hook,
    );
    expect(await sum(/^tollgate_alert_deliveries_total\{target="tenant",result="sent"\} (\d+)/m)).toBe(1);
    expect(
      await sum(/^tollgate_budget_alerts_total\{limit="pro\.chat",event="budget\.threshold"\} (\d+)/m),
    ).toBeLessThanOrEqual(3);
    // Neither the URL's token nor a secret is ever in a log line.
    for (const line of [...a.lines, ...b.lines].map((l) => JSON.stringify(l))) {
      expect(line).not.toContain("url-secret");
      expect(line).not.toContain(HOOK_SECRET);
      expect(line).not.toContain(ACME_SECRET);
    }
    const described = await send(a.adminUrl, {
      path: "/admin/config",
      headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
    });
    expect(described.status).toBe(200);
    expect(described.body).not.toContain("url-secret");
    expect(described.body).not.toContain(HOOK_SECRET);
    expect(JSON.parse(described.body).alerts.webhooks).toEqual([
      {
        name: "billing",
        events: ["budget.threshold", "budget.exhausted"],
        url: "set",
        secret: "set",
        timeout: "5s",
      },
    ]);
  }, 60_000);
});
