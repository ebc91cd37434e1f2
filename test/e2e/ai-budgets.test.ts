// Budgets for AI endpoints (issue 17), as operators run them: two gateway processes sharing one
// real Redis in front of a fake OpenAI/Anthropic upstream (test/support/llm-upstream.ts). Every
// tenant has a monthly token budget (`unit: tokens`, a calendar fixed_window) charged from the
// usage the upstream reports, in a JSON body, in a stream's events, or in Tollgate-Cost (head or
// trailer). Each test has callers of its own, so no test sees another's charges.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { Agent } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { type GatewayProcess, metricValue, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import {
  epochMs,
  type LlmExchange,
  type LlmUpstream,
  readStream,
  type StreamReply,
  startLlmUpstream,
} from "../support/llm-upstream.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const ADMIN_TOKEN = "ai-budgets-admin-token";
const BUDGET = 1000; // plan ai: tokens per tenant per calendar month
const COST = 10; // route chat's cost, taken up front
const MAX_COST = 200; // route chat's max_cost

/** Callers on plan ai, each its own tenant (and so its own budget). */
const SOLO = [
  "exact",
  "leave-after",
  "leave-before",
  "hdr-head",
  "hdr-trailer",
  "hdr-trailer-json",
  "hdr-body-only",
  "use-ignores-head",
  "use-ignores-trailer",
  "both-usage",
  "both-header",
  "flood",
  "alive",
];
const HOSTILE = [
  // An honest report below the route's cost gives none of the cost back.
  { client: "h-below-cost", mode: "normal", stream: true, charged: COST, tokens: [1, 2] },
  // A count that is no token count is no report: the answer costs the route's max_cost (chat),
  // or its cost on a route without one (messages).
  { client: "h-negative", mode: "negative", stream: true, charged: MAX_COST },
  { client: "h-nan", mode: "nan", stream: true, charged: MAX_COST },
  { client: "h-string", mode: "string", stream: true, charged: MAX_COST },
  { client: "h-nan-json", mode: "nan", stream: false, charged: MAX_COST },
  { client: "h-negative-anthropic", mode: "negative", stream: true, charged: COST, anthropic: true },
  // A whole number above the cap (1 000 000) is charged as the cap: the budget is spent.
  { client: "h-huge", mode: "huge", stream: true, charged: BUDGET },
  { client: "h-exponent", mode: "exponent", stream: true },
  { client: "h-truncate", mode: "truncate", stream: true, cut: true },
  { client: "h-truncate-json", mode: "truncate", stream: false, cut: true },
] as const;

const config = (redisUrl: string, llmUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${ADMIN_TOKEN} }
log: { level: info, requests: false }
calendar: { tz: UTC }
store: { url: ${redisUrl}, timeout: 500ms, on_failure: closed }
upstreams:
  llm: { url: ${llmUrl}, timeout: 60s }
clients:
${[...SOLO, ...HOSTILE.map((h) => h.client)].map((id) => `  - { id: ${id}, key: key-${id}, plan: ai, tenant: t-${id} }`).join("\n")}
  - { id: lat, key: key-lat, plan: big, tenant: t-lat }
  - { id: u1, key: key-u1, plan: big, tenant: t-usage }
  - { id: u2, key: key-u2, plan: big, tenant: t-usage }
plans:
  ai:
    global: { rate: 100000/s, burst: 100000 }
    tenant: { algorithm: fixed_window, limit: ${BUDGET}, window: 1 month, unit: tokens }
  big:
    global: { rate: 100000/s, burst: 100000 }
    tenant: { algorithm: fixed_window, limit: 100000000, window: 1 month, unit: tokens }
routes:
  - name: chat
    match: { path: /v1/chat/completions, methods: [POST] }
    upstream: llm
    cost: ${COST}
    max_cost: ${MAX_COST}
    charge: usage
  - { name: messages, match: { path: /v1/messages, methods: [POST] }, upstream: llm, cost: ${COST}, charge: usage }
  - { name: by-header, match: { path: /by-header, methods: [POST] }, upstream: llm, cost: ${COST}, charge: header }
  - name: by-both
    match: { path: /by-both, methods: [POST] }
    upstream: llm
    cost: ${COST}
    charge: [header, usage]
`;

let redis: RedisProcess;
let upstream: LlmUpstream;
let yaml: string;
let a: GatewayProcess;
let b: GatewayProcess;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startLlmUpstream();
  yaml = config(redis.url, upstream.url);
  [a, b] = await Promise.all([spawnGateway(yaml), spawnGateway(yaml)]);
  // Warm both (JIT, Redis scripts, upstream pools) on a caller no assertion reads.
  for (let i = 0; i < 6; i++) await llm(i % 2 ? b : a, "lat", { stream: i % 3 !== 0 });
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await upstream?.close();
  await redis?.stop();
});

interface Ask {
  path?: string;
  stream?: boolean;
  tokens?: [number, number];
  headers?: Record<string, string>;
  leaveWhen?: Parameters<typeof readStream>[1]["leaveWhen"];
  agent?: Agent;
}

/** A completion request as `client`, through `gw` (or straight to the upstream). */
function llm(gw: GatewayProcess | "direct", client: string, ask: Ask = {}): Promise<StreamReply> {
  const path = ask.path ?? "/v1/chat/completions";
  return readStream(gw === "direct" ? upstream.url : gw.url, {
    path,
    keepBody: true,
    agent: ask.agent,
    leaveWhen: ask.leaveWhen,
    headers: {
      "x-api-key": `key-${client}`,
      ...(ask.tokens ? { "x-test-tokens": ask.tokens.join(",") } : {}),
      ...ask.headers,
    },
    body: {
      model: "fake-model",
      stream: ask.stream ?? true,
      messages: [{ role: "user", content: "How are tokens counted?" }],
      max_tokens: 100,
    },
  });
}

const admin = (gw: GatewayProcess, path: string) =>
  send(gw.adminUrl, { path, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });

/** What is left of `client`'s tenant budget, read without consuming (GET /admin/callers). */
async function remaining(gw: GatewayProcess, client: string, limit = "ai.tenant"): Promise<number> {
  const r = await admin(gw, `/admin/callers/client:${client}`);
  expect(r.status, r.body).toBe(200);
  const found = r
    .json<{ limits: { name: string; remaining: number }[] }>()
    .limits.find((l) => l.name === limit);
  if (!found) throw new Error(`no limit ${limit} in ${r.body}`);
  return found.remaining;
}

/** Polls `read` until it returns `want` (a charge recorded after the client left), or times out. */
async function settles<T>(read: () => Promise<T>, want: T, ms = 3000): Promise<T> {
  const deadline = Date.now() + ms;
  let got = await read();
  while (got !== want && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 25));
    got = await read();
  }
  return got;
}

/** The budget's own entry of the ietf `RateLimit` header: `"ai.tenant";r=990;t=…` → 990. */
function ietfRemaining(reply: StreamReply, limit = "ai.tenant"): number {
  const m = new RegExp(`"${limit.replace(".", "\\.")}";r=(\\d+)`).exec(String(reply.headers.ratelimit));
  return m ? Number(m[1]) : Number.NaN;
}

const median = (xs: number[]) => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)]!;
const thisMonth = () => new Date().toISOString().slice(0, 7);
const today = () => new Date().toISOString().slice(0, 10);
const nextMonth = () => {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1));
};
const secondsToNextMonth = () => Math.ceil((nextMonth().getTime() - Date.now()) / 1000);

describe("a streamed completion through the gateway", () => {
  it("each event reaches the client within 20 ms of leaving the upstream, against a direct connection (median of 20)", async () => {
    // Four events 15 ms apart: a gateway that held the body until the usage came would deliver
    // the first one 60 ms late at least.
    const ask: Ask = { headers: { "x-test-events": "4", "x-test-delay-ms": "15" } };
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const first = { direct: [] as number[], gateway: [] as number[] };
    const every = { direct: [] as number[], gateway: [] as number[] };
    for (let i = 0; i < 20; i++) {
      for (const [via, reply] of [
        ["direct", await llm("direct", "lat", { ...ask, agent })],
        ["gateway", await llm(a, "lat", { ...ask, agent })],
      ] as const) {
        expect(reply.status).toBe(200);
        expect(reply.complete).toBe(true);
        const timed = reply.events.filter((e) => Number.isFinite(e.sentAt));
        expect(timed).toHaveLength(5); // 4 content events and the usage
        first[via].push(timed[0]!.arrivedAt - timed[0]!.sentAt);
        for (const e of timed) every[via].push(e.arrivedAt - e.sentAt);
      }
    }
    agent.destroy();
    const added = median(first.gateway) - median(first.direct);
    const addedPerEvent = median(every.gateway) - median(every.direct);
    expect(
      added,
      `first event: gateway median ${median(first.gateway).toFixed(2)} ms, direct ${median(first.direct).toFixed(2)} ms`,
    ).toBeLessThan(20);
    expect(addedPerEvent, "per event").toBeLessThan(20);
  });

  it("charges the exact tokens after the stream, one budget across both instances; refuses at max_cost naming the budget and its reset", async () => {
    const client = "exact";
    expect(await remaining(a, client)).toBe(BUDGET);
    // 1. A stream through a: the cost up front (its head says 990), 42 tokens once it ends.
    const r1 = await llm(a, client, { tokens: [12, 30] });
    expect(r1.status).toBe(200);
    expect(r1.headers["ratelimit-remaining"]).toBe(String(BUDGET - COST));
    // The charge is recorded before the client's response ends: no waiting here.
    expect(await remaining(b, client)).toBe(BUDGET - 42);
    // 2. A JSON completion through b: its head shows the charge of the first, and its cost.
    const r2 = await llm(b, client, { stream: false, tokens: [100, 200] });
    expect(r2.status).toBe(200);
    expect(JSON.parse(r2.body).usage.total_tokens).toBe(300);
    expect(r2.headers["ratelimit-remaining"]).toBe(String(BUDGET - 42 - COST));
    expect(ietfRemaining(r2)).toBe(BUDGET - 42 - COST);
    expect(await remaining(a, client)).toBe(BUDGET - 342);
    // 3. A stream through a leaves exactly max_cost.
    const r3 = await llm(a, client, { tokens: [400, 58] });
    expect(r3.headers["ratelimit-remaining"]).toBe(String(BUDGET - 342 - COST));
    expect(await remaining(b, client)).toBe(MAX_COST);
    // That passed 80 % (calendar.alert_at's default) of the budget: one alert, on the instance
    // that charged it, logged with the caller.
    const alerts = (gw: GatewayProcess) =>
      metricValue(
        gw.adminUrl,
        /^tollgate_budget_alerts_total\{limit="ai\.tenant",event="budget\.threshold"\} (\d+)/m,
      );
    const alerted = () => a.lines.filter((l) => l.limit === "ai.tenant" && l.caller === "client:exact");
    expect(await settles(async () => alerted().length, 1)).toBe(1);
    expect(String(alerted()[0]!.msg)).toMatch(/^budget alert: "ai\.tenant" passed 80 %/);
    expect(await alerts(a)).toBe(1);
    // 4. max_cost left: admitted, and charged what it reports.
    const r4 = await llm(b, client, { tokens: [50, 100] });
    expect(r4.status).toBe(200);
    expect(r4.headers["ratelimit-remaining"]).toBe(String(MAX_COST - COST));
    expect(await remaining(a, client)).toBe(MAX_COST - 150);
    // Once per period: the budget was already past 80 %, so b does not alert again.
    expect(alerted()).toHaveLength(1);
    expect(b.lines.filter((l) => l.caller === "client:exact" && l.limit === "ai.tenant")).toHaveLength(0);
    expect((await alerts(b)) || 0).toBe(0);
    // 5. Less than max_cost left: refused up front, never sent upstream.
    const sent = upstream.exchanges.length;
    const r5 = await llm(a, client, { tokens: [1, 1] });
    expect(r5.status).toBe(429);
    expect(upstream.exchanges.length).toBe(sent);
    const problem = JSON.parse(r5.body);
    expect(problem["violated-policies"]).toEqual(["ai.tenant"]);
    expect(problem.detail).toContain("ai.tenant");
    // It resets at 00:00 UTC on the 1st of next month.
    const reset = secondsToNextMonth();
    expect(Math.abs(problem.retry_after_seconds - reset)).toBeLessThanOrEqual(5);
    expect(problem.retry_at).toBe(nextMonth().toISOString());
    expect(Math.abs(Number(r5.headers["retry-after"]) - reset)).toBeLessThanOrEqual(5);
    expect(Math.abs(Number(r5.headers["ratelimit-reset"]) - reset)).toBeLessThanOrEqual(5);
    expect(await remaining(b, client)).toBe(MAX_COST - 150);
  });

  it("a client that leaves after the usage event is charged that usage; one that leaves before any is charged the route's max_cost", async () => {
    // The upstream reports 65 tokens, then takes 3 s to end; the client leaves on the report.
    const after = await llm(a, "leave-after", {
      tokens: [25, 40],
      headers: { "x-test-linger-ms": "3000" },
      leaveWhen: (e) => e.data.includes('"usage"'),
    });
    expect(after.complete).toBe(false);
    expect(await settles(() => remaining(b, "leave-after"), BUDGET - 65)).toBe(BUDGET - 65);

    // Ten events 150 ms apart and the usage at the end; the client leaves after the first.
    const before = await llm(b, "leave-before", {
      tokens: [300, 300],
      headers: { "x-test-events": "10", "x-test-delay-ms": "150" },
      leaveWhen: (_e, i) => i === 0,
    });
    expect(before.complete).toBe(false);
    const exchange = upstream.exchanges.at(-1)!;
    expect(exchange.headers["tollgate-client"]).toBe("leave-before");
    // Whatever the upstream does after the client left (stop, or finish and report) costs nothing more.
    await Promise.race([exchange.outcome, new Promise((r) => setTimeout(r, 2500))]);
    await new Promise((r) => setTimeout(r, 100));
    // Nothing was reported before it left: what the route declares a request may cost.
    expect(await remaining(a, "leave-before")).toBe(BUDGET - MAX_COST);
    // And the first one was not charged twice when its upstream ended.
    await upstream.exchanges.find((e) => e.headers["tollgate-client"] === "leave-after")!.outcome;
    expect(await remaining(a, "leave-after")).toBe(BUDGET - 65);
  });
});

describe("what the upstream reports, by the route's charge", () => {
  it("charge: header takes Tollgate-Cost from the head or a trailer and ignores the body's usage", async () => {
    const head = await llm(a, "hdr-head", {
      path: "/by-header/v1/chat/completions",
      tokens: [100, 200],
      headers: { "x-test-cost": "55" },
    });
    expect(head.status).toBe(200);
    expect(head.headers["tollgate-cost"]).toBeUndefined();
    // Charged before the head left: the head says what is left after it.
    expect(head.headers["ratelimit-remaining"]).toBe(String(BUDGET - 55));
    expect(await remaining(b, "hdr-head")).toBe(BUDGET - 55);

    const trailer = await llm(b, "hdr-trailer", {
      path: "/by-header/v1/chat/completions",
      tokens: [100, 200],
      headers: { "x-test-cost-trailer": "77" },
    });
    expect(trailer.complete).toBe(true);
    expect(await remaining(a, "hdr-trailer")).toBe(BUDGET - 77);

    const trailerJson = await llm(a, "hdr-trailer-json", {
      path: "/by-header/v1/chat/completions",
      stream: false,
      tokens: [100, 200],
      headers: { "x-test-cost-trailer": "66" },
    });
    expect(JSON.parse(trailerJson.body).usage.total_tokens).toBe(300);
    expect(await remaining(b, "hdr-trailer-json")).toBe(BUDGET - 66);

    await llm(b, "hdr-body-only", { path: "/by-header/v1/chat/completions", tokens: [100, 200] });
    expect(await remaining(a, "hdr-body-only")).toBe(BUDGET - COST);
  });

  it("charge: usage reads the body and ignores Tollgate-Cost, in the head or a trailer", async () => {
    const head = await llm(a, "use-ignores-head", { tokens: [20, 40], headers: { "x-test-cost": "900" } });
    expect(head.headers["ratelimit-remaining"]).toBe(String(BUDGET - COST));
    expect(await remaining(b, "use-ignores-head")).toBe(BUDGET - 60);

    await llm(b, "use-ignores-trailer", {
      stream: false,
      tokens: [20, 40],
      headers: { "x-test-cost-trailer": "900" },
    });
    expect(await remaining(a, "use-ignores-trailer")).toBe(BUDGET - 60);
  });

  it("charge: [header, usage] reads the body's usage, and Tollgate-Cost when the body has none", async () => {
    await llm(a, "both-usage", { path: "/by-both/v1/chat/completions", tokens: [30, 50] });
    expect(await remaining(b, "both-usage")).toBe(BUDGET - 80);
    await llm(b, "both-header", {
      path: "/by-both/v1/chat/completions",
      headers: { "x-test-cost": "70", "x-test-mode": "string" },
    });
    expect(await remaining(a, "both-header")).toBe(BUDGET - 70);
  });
});

describe("a hostile upstream", () => {
  it.each(HOSTILE)(
    "$mode ($client): the request ends or is cut cleanly and the budget is never credited",
    async (h) => {
      const before = await remaining(a, h.client);
      const reply = await llm(a, h.client, {
        path: "anthropic" in h ? "/v1/messages" : "/v1/chat/completions",
        stream: h.stream,
        tokens: "tokens" in h ? [...h.tokens] : [30, 40],
        headers: { "x-test-mode": h.mode },
      });
      expect(reply.status).toBe(200);
      expect(reply.complete).toBe(!("cut" in h));
      // A charge for a cut response is recorded when the gateway sees it end.
      await new Promise((r) => setTimeout(r, 150));
      const after = await remaining(b, h.client);
      expect(after).toBeLessThanOrEqual(before - COST);
      if ("charged" in h) expect(after).toBe(Math.max(0, before - h.charged));
      // The same still after a while: nothing comes back later either.
      await new Promise((r) => setTimeout(r, 100));
      expect(await remaining(a, h.client)).toBe(after);
    },
  );

  it("100 MB of events: streamed to the end, charged exactly, Redis answering PING within 50 ms throughout", async () => {
    // Redis's own account of what it ran: any command that took 50 ms or more. (Its clock is
    // the wall's: a command the OS paused for a time slice on this busy machine shows 10-20 ms.)
    await redis.client.config("SET", "slowlog-log-slower-than", "50000");
    await redis.client.slowlog("RESET");
    const pinger = startPinger(redis.port);
    const rssBefore = await metricValue(a.adminUrl, /^tollgate_process_resident_memory_bytes (\d+)/m);
    const started = epochMs();
    const reply = await llm(a, "flood", { tokens: [33, 44], headers: { "x-test-mode": "flood" } });
    const seconds = (epochMs() - started) / 1000;
    const pings = await pinger.stop();
    const rssAfter = await metricValue(a.adminUrl, /^tollgate_process_resident_memory_bytes (\d+)/m);
    expect(reply.status).toBe(200);
    expect(reply.complete).toBe(true);
    expect(reply.bytes).toBeGreaterThan(100 * 1024 * 1024);
    expect(await remaining(b, "flood")).toBe(BUDGET - 77);
    expect(pings.ms.length, `PINGs during ${seconds.toFixed(1)} s`).toBeGreaterThan(10);
    // Nine PINGs in ten answered within 50 ms. A blocked Redis stalls every PING sent meanwhile;
    // the few slow ones a loaded 2-core machine shows are the scheduler pausing the pinger or
    // Redis, and Redis's own slow log below (time spent inside each command) is the proof that
    // no command of the flood's charges blocked it.
    const slowest = [...pings.ms].sort((x, y) => y - x);
    expect(
      slowest[Math.floor(slowest.length / 10)],
      `PINGs during the flood, slowest first: ${slowest.slice(0, 5).map((ms) => ms.toFixed(1))}`,
    ).toBeLessThan(50);
    const slow = (await redis.client.slowlog("GET", 10)) as [number, number, number, string[]][];
    expect(slow.map(([, , us, command]) => `${command.join(" ").slice(0, 80)}: ${us} µs`)).toEqual([]);
    // The body passes through: the gateway never holds it (100 MB would show).
    expect(rssAfter - rssBefore).toBeLessThan(64 * 1024 * 1024);
  });

  it("neither gateway crashed, and both still serve", async () => {
    expect(a.child.exitCode).toBeNull();
    expect(b.child.exitCode).toBeNull();
    for (const gw of [a, b]) {
      const r = await llm(gw, "alive", { tokens: [5, 6] });
      expect(r.status).toBe(200);
      expect(r.complete).toBe(true);
    }
    expect(a.stderr.join("") + b.stderr.join("")).not.toMatch(/uncaught|unhandled/i);
  });
});

describe("config/examples/ai-endpoints.yaml", () => {
  let gw: GatewayProcess;
  let provider: FakeProvider;
  beforeAll(async () => {
    provider = await startFakeProvider();
    // As shipped, on free ports, both upstreams the fake provider.
    const shipped = readFileSync(new URL("../../config/examples/ai-endpoints.yaml", import.meta.url), "utf8")
      .replace("listen: 0.0.0.0:8080", "listen: 127.0.0.1:0")
      .replace("listen: 127.0.0.1:9090", "listen: 127.0.0.1:0");
    gw = await spawnGateway(shipped, {
      LLM_URL: provider.url,
      ANTHROPIC_URL: provider.url,
      REDIS_URL: redis.url,
      ADMIN_TOKEN,
      DEV_KEY: "example-dev-key",
    });
  });
  afterAll(async () => {
    await gw?.stop();
    await provider?.close();
  });
  const post = (path: string, body: Record<string, unknown>, method = "POST") =>
    send(gw.url, {
      method,
      path,
      headers: { "x-api-key": "example-dev-key", "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const spent = async () =>
    (await admin(gw, `/admin/usage/tenant:dev?period=${thisMonth()}`)).json<{
      limits: Record<string, { tokens: number; requests: number; usd?: number }>;
    }>().limits["team.tenant"];

  it("meters every completion endpoint OpenAI, LiteLLM, vLLM, Azure-style and Anthropic-style servers serve, and refuses what it cannot price", async () => {
    provider.behave = () => ({ prompt: 30, completion: 3000 });
    const model = "gpt-4o-mini";
    const chat = { model, max_tokens: 3000, messages: [{ role: "user", content: "x" }] };
    const completion = { model, max_tokens: 3000, prompt: "x" };
    const metered: [string, Record<string, unknown>][] = [
      ["/v1/chat/completions", chat],
      ["/chat/completions", chat], // LiteLLM without /v1
      ["/v1/completions", completion], // vLLM
      // Azure style, and legacy OpenAI: the model is the one the path names.
      ["/openai/deployments/gpt-4o-mini/chat/completions", { ...chat, model: "gpt-4o" }],
      ["/engines/gpt-4o-mini/completions", completion],
      [
        "/v1/messages",
        { model: "claude-sonnet-4-5", max_tokens: 3000, messages: [{ role: "user", content: "x" }] },
      ],
    ];
    let expected = 0;
    let requests = 0;
    for (const [path, body] of metered) {
      const before = provider.requests.length;
      const reply = await post(path, body);
      expect(reply.status, `${path}: ${reply.body}`).toBe(200);
      expect(provider.requests.length, path).toBe(before + 1);
      // gpt-4o-mini*: $0.15 in, $0.60 out; claude-sonnet-4*: $3 in, $15 out (per million).
      const [input, output] = path.endsWith("/messages") ? [3_000_000, 15_000_000] : [150_000, 600_000];
      expected += Math.ceil((30 * input + 3000 * output) / 1_000_000);
      // Each one settled, and recorded under the tenant's money budget.
      expect(await settles(async () => (await spent())?.requests, ++requests)).toBe(requests);
    }
    expect(Math.round((await spent())!.usd! * 1_000_000)).toBe(expected);
    // What it cannot price is refused, and never forwarded.
    const before = provider.requests.length;
    const put = await post("/v1/chat/completions", chat, "PUT");
    expect(put.status).toBe(405);
    expect(put.headers.allow).toBe("POST");
    expect((await post("/v1/images/generations", { prompt: "a cat" })).status).toBe(404);
    expect((await post("/api/chat", chat)).status).toBe(404); // Ollama's native API
    expect((await post("/messages", chat)).status).toBe(404);
    // A deployment the price table does not know is not priced by the body's model.
    expect((await post("/openai/deployments/prod-4o/chat/completions", chat)).status).toBe(400);
    expect(provider.requests.length).toBe(before);
  });

  it("a caller's tokens per minute per model: clamped to what is left, then a 429 naming the limit", async () => {
    provider.behave = () => ({ prompt: 20, completion: 4096 });
    const sent: number[] = [];
    let denied: Awaited<ReturnType<typeof post>> | undefined;
    // Four completions per request (n: 4): each holds 4 × 4096 tokens, so the bucket fills in
    // fewer requests than team.global (10/s, bursts of 20) lets through.
    for (let i = 0; i < 12 && !denied; i++) {
      const reply = await post("/v1/chat/completions", {
        model: "gpt-4o",
        max_tokens: 4096,
        n: 4,
        messages: [{ role: "user", content: "fill the bucket" }],
      });
      if (reply.status === 429) denied = reply;
      else sent.push(provider.requests.at(-1)!.body.max_completion_tokens as number);
    }
    // 100,000 tokens a minute: 6 whole requests, one lowered to what was left, then refused.
    expect(sent.filter((t) => t === 4096)).toHaveLength(6);
    expect(sent).toHaveLength(7);
    expect(sent[6]).toBeLessThan(4096);
    expect(sent[6]).toBeGreaterThanOrEqual(64);
    expect(denied!.json<{ error: Record<string, unknown> }>().error["violated-policies"]).toEqual([
      "team.openai",
    ]);
    // A token bucket refills: the wait is seconds, not the month.
    expect(Number(denied!.headers["retry-after"])).toBeLessThanOrEqual(60);
    expect(denied!.headers.ratelimit).toContain('"team.openai";r=');
  });
});

describe("the usage API", () => {
  interface UsageReport {
    caller: string;
    period: string;
    limits: Record<string, { tokens: number; requests: number }>;
  }
  const read = async (gw: GatewayProcess, caller: string, period: string) => {
    const r = await admin(gw, `/admin/usage/${caller}?period=${period}`);
    expect(r.status, r.body).toBe(200);
    return r.json<UsageReport>();
  };
  /** Every page of GET /admin/usage?period=…&by=…. */
  const list = async (gw: GatewayProcess, period: string, by: string) => {
    const callers: UsageReport[] = [];
    let cursor: string | null = null;
    do {
      const r = await admin(gw, `/admin/usage?period=${period}&by=${by}${cursor ? `&cursor=${cursor}` : ""}`);
      expect(r.status, r.body).toBe(200);
      const page = r.json<{
        period: string;
        by: string;
        callers: UsageReport[];
        next_cursor: string | null;
      }>();
      expect(page).toMatchObject({ period, by });
      callers.push(...page.callers);
      cursor = page.next_cursor ?? null;
    } while (cursor);
    return callers;
  };
  const of = (client: string) => (e: LlmExchange) => e.headers["tollgate-client"] === client;
  const count = (client: string) => upstream.exchanges.filter(of(client)).length;

  /** The ledger, read through `gw`, equals what the upstream reported to u1 and u2. */
  async function expectTotals(gw: GatewayProcess) {
    const want = {
      u1: { tokens: upstream.reportedSum(of("u1")), requests: count("u1") },
      u2: { tokens: upstream.reportedSum(of("u2")), requests: count("u2") },
    };
    const tenant = { tokens: want.u1.tokens + want.u2.tokens, requests: want.u1.requests + want.u2.requests };
    const tokensOf = async (caller: string, period: string) =>
      (await read(gw, caller, period)).limits["big.tenant"]?.tokens;
    // The ledger is written after the response, fire and forget: give it a moment.
    await settles(() => tokensOf("tenant:t-usage", thisMonth()), tenant.tokens);
    for (const period of [thisMonth(), today()]) {
      for (const client of ["u1", "u2"] as const) {
        const r = await read(gw, `client:${client}`, period);
        expect(r).toMatchObject({ caller: `client:${client}`, period });
        expect(r.limits["big.tenant"], `client:${client} in ${period}`).toEqual(want[client]);
      }
      expect((await read(gw, "tenant:t-usage", period)).limits["big.tenant"]).toEqual(tenant);
      const listed = (await list(gw, period, "tenant")).find((c) => c.caller === "tenant:t-usage");
      expect(listed?.limits["big.tenant"], `by=tenant in ${period}`).toEqual(tenant);
      const clients = await list(gw, period, "client");
      for (const client of ["u1", "u2"] as const)
        expect(clients.find((c) => c.caller === `client:${client}`)?.limits["big.tenant"]).toEqual(
          want[client],
        );
    }
  }

  it("per client and per tenant equal the tokens the upstream reported, across both instances and a restart", async () => {
    // OpenAI and Anthropic, streamed and JSON, through both instances, by two clients of a tenant.
    const paths = ["/v1/chat/completions", "/v1/messages"];
    for (let i = 0; i < 12; i++) {
      const r = await llm(i % 3 === 0 ? b : a, i % 2 ? "u2" : "u1", {
        path: paths[(i >> 1) % 2],
        stream: i % 4 < 2,
        tokens: [11 + 7 * i, 23 + 13 * i],
      });
      expect(r.status).toBe(200);
    }
    expect(upstream.reportedSum(of("u1")) + upstream.reportedSum(of("u2"))).toBeGreaterThan(0);
    await expectTotals(a);
    await expectTotals(b);

    // A restarted instance reads the same ledger, and adds to it.
    await a.stop();
    a = await spawnGateway(yaml);
    await expectTotals(a);
    for (const client of ["u1", "u2"]) expect((await llm(a, client, { tokens: [40, 2] })).status).toBe(200);
    await expectTotals(a);
    await expectTotals(b);
  });
});

/**
 * PINGs a Redis every 5 ms from a process of its own (this one is busy streaming 100 MB both
 * ways, and its own pauses are not Redis's), until stop(): how long each took.
 */
function startPinger(port: number): { stop(): Promise<{ ms: number[] }> } {
  const script = `
    const s = require("node:net").connect(Number(process.argv[1]), "127.0.0.1");
    let sent = 0, stopping = false;
    const ms = [];
    const ping = () => { sent = performance.now(); s.write("PING\\r\\n"); };
    s.on("connect", ping);
    s.on("data", () => {
      ms.push(performance.now() - sent);
      if (!stopping) setTimeout(ping, 5);
    });
    process.stdin.on("data", () => {
      stopping = true;
      process.stdout.write(JSON.stringify({ ms }));
      process.exit(0);
    });`;
  const child = spawn(process.execPath, ["-e", script, String(port)], { stdio: ["pipe", "pipe", "inherit"] });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => {
    out += d.toString();
  });
  return {
    async stop() {
      const exited = new Promise((r) => child.on("exit", r));
      child.stdin!.write("stop\n");
      await exited;
      return JSON.parse(out);
    },
  };
}
