// AI budgets that hold (issue 29): two gateway instances on one real redis-server in front of a
// fake provider (test/support/ai-provider.ts) that honours the output ceiling it is sent. Every
// request reserves its prompt's bound and its output ceiling in the same atomic check as its
// rate limits, and is settled to the usage its answer reports; a client that hangs up, or
// streams without asking for usage, pays what the upstream reported or its reservation, never
// less; a per-model limit and a price follow the model the body names, whatever a header says;
// a money budget charges exactly what the reported usage costs, to the micro-dollar.
import { request as httpRequest } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { deadPort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const ADMIN = "ai-reserve-admin";
const TENANTS = ["conc", "clamp", "hang", "nousage", "model", "money", "errors"] as const;

const config = (redisUrl: string, providerUrl: string, deadPort: number) => `
listen: 127.0.0.1:0
admin: { listen: "127.0.0.1:0", token: ${ADMIN} }
log: { level: warn, requests: false }
store: { url: "${redisUrl}", on_failure: closed }
calendar: { tz: UTC, alert_at: false }
models:
  gpt-4o: { input: 2.5, output: 10, cached_input: 1.25 }
  gpt-4o-mini: { input: 0.15, output: 0.6 }
  cheap: { input: 0.01, output: 0.01 }
  expensive: { input: 30, output: 60 }
upstreams:
  llm: { url: "${providerUrl}", timeout: 30s }
  dead: { url: "http://127.0.0.1:${deadPort}", connect_timeout: 500ms }
clients:
${TENANTS.flatMap((t) => [1, 2, 3, 4].map((i) => `  - { id: ${t}-${i}, key: ${t}-key-${i}, plan: ${t === "money" ? "dollars" : t === "model" ? "models" : "team"}, tenant: ${t} }`)).join("\n")}
plans:
  team:
    tenant: { algorithm: fixed_window, limit: 10000, window: 1 month, unit: tokens }
  models:
    routes:
      chat: { rate: 1/h, burst: 2, by: [caller, "body:model"] }
      clamped: { rate: 1/h, burst: 2, by: [caller, "body:model"] }
    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: usd }
  dollars:
    tenant: { algorithm: fixed_window, limit: 1.00, window: 1 month, unit: usd }
routes:
  - name: dead
    match: { path: /dead, methods: [POST] }
    upstream: dead
    ai: { format: openai, max_output: 9000 }
  - name: clamped
    match: { path: /clamped, methods: [POST] }
    upstream: llm
    rewrite: { prefix: /v1 }
    ai: { format: openai, max_output: 9000, clamp: true, min_output: 100 }
  - name: chat
    match: { path: /v1, methods: [POST] }
    upstream: llm
    ai: { format: openai, max_output: 9000 }
`;

let redis: RedisProcess;
let provider: FakeProvider;
let a: InProcessGateway;
let b: InProcessGateway;

beforeAll(async () => {
  redis = await startRedis();
  provider = await startFakeProvider();
  const dead = await deadPort();
  a = await startGateway(config(redis.url, provider.url, dead));
  b = await startGateway(config(redis.url, provider.url, dead));
});

afterAll(async () => {
  await a?.stop();
  await b?.stop();
  await provider?.close();
  await redis?.stop();
});

const chat = (key: string, body: Record<string, unknown>, path = "/v1/chat/completions", headers = {}) =>
  send(a.url, {
    method: "POST",
    path,
    headers: { "x-api-key": key, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });

const forTenant = (t: string) => (r: { headers: Record<string, unknown> }) =>
  r.headers["tollgate-tenant"] === t;

async function usageOf(tenant: string) {
  await new Promise((r) => setTimeout(r, 50));
  const period = new Date().toISOString().slice(0, 7);
  const reply = await send(a.adminUrl, {
    path: `/admin/usage/tenant:${tenant}?period=${period}`,
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return reply.json<{ limits: Record<string, { tokens: number; requests: number; usd?: number }> }>();
}

describe("reserve before, settle after", () => {
  it("20 concurrent streams from 4 clients over two instances: at most 3 admitted, ≤ 10,000 charged, none refused reaches the upstream", async () => {
    // 3,000 per completion, a prompt within its bytes (a tokenizer's tokens are at least a byte).
    provider.behave = () => ({ prompt: 10, completion: 2990 });
    const body = (i: number) => ({
      model: "gpt-4o",
      stream: true,
      max_tokens: 2990,
      messages: [{ role: "user", content: `hello ${i}` }],
    });
    const replies = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        send(i % 2 ? a.url : b.url, {
          method: "POST",
          path: "/v1/chat/completions",
          headers: { "x-api-key": `conc-key-${(i % 4) + 1}`, "content-type": "application/json" },
          body: JSON.stringify(body(i)),
        }),
      ),
    );
    const admitted = replies.filter((r) => r.status === 200);
    const refused = replies.filter((r) => r.status === 429);
    expect(admitted.length + refused.length).toBe(20);
    expect(admitted.length).toBeGreaterThanOrEqual(1);
    expect(admitted.length).toBeLessThanOrEqual(3);
    const reached = provider.requests.filter(forTenant("conc"));
    expect(reached.length).toBe(admitted.length);
    const usage = await usageOf("conc");
    expect(usage.limits["team.tenant"]!.tokens).toBe(3000 * admitted.length);
    expect(admitted.length).toBe(3);
    expect(usage.limits["team.tenant"]!.tokens).toBeLessThanOrEqual(10_000);
    expect(refused[0]!.json<{ error: { message: string } }>().error.message).toMatch(
      /team\.tenant.*left, and this request reserves/,
    );
  });

  it("clamp: the request that does not fit is forwarded with the output its budget can still hold", async () => {
    provider.behave = () => ({ prompt: 20, completion: 4000 });
    const ask = (i: number) =>
      chat(
        `clamp-key-${i}`,
        { model: "gpt-4o", max_tokens: 4000, messages: [{ role: "user", content: "hi" }] },
        "/clamped/chat/completions",
      );
    expect((await ask(1)).status).toBe(200);
    expect((await ask(2)).status).toBe(200);
    // 10,000 − 2 × (4,000 + the prompt's bound): under 2,000 left.
    const third = await ask(3);
    expect(third.status).toBe(200);
    const sent = provider.requests.filter(forTenant("clamp")).at(-1)!;
    expect(sent.body.max_completion_tokens).toBeGreaterThanOrEqual(100);
    expect(sent.body.max_completion_tokens).toBeLessThan(4000);
    // Below min_output nothing is forwarded.
    const fourth = await ask(4);
    expect(fourth.status).toBe(429);
    expect(provider.requests.filter(forTenant("clamp"))).toHaveLength(3);
    const usage = await usageOf("clamp");
    expect(usage.limits["team.tenant"]!.tokens).toBeLessThanOrEqual(10_000);
    expect(usage.limits["team.tenant"]!.tokens).toBe(provider.generated(forTenant("clamp")));
  });

  it("a stream without include_usage is asked for it, and charged what the upstream reported", async () => {
    provider.behave = () => ({ prompt: 50, completion: 9000 });
    const reply = await chat("nousage-key-1", {
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: "long" }],
    });
    expect(reply.status).toBe(200);
    // The client sees the standard final usage chunk it did not ask for.
    expect(reply.body).toContain('"choices":[]');
    const sent = provider.requests.filter(forTenant("nousage")).at(-1)!;
    expect(sent.body.stream_options).toEqual({ include_usage: true });
    // No ceiling given: the route's max_output was written in, under max_completion_tokens.
    expect(sent.body.max_completion_tokens).toBe(9000);
    const usage = await usageOf("nousage");
    expect(usage.limits["team.tenant"]!.tokens).toBe(9050);
  });

  it("a client that hangs up before the usage event pays its reservation, never less than the upstream generated", async () => {
    provider.behave = () => ({ prompt: 50, completion: 9000, events: 4, delayMs: 150 });
    const body = JSON.stringify({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: "long" }],
    });
    await new Promise<void>((resolve, reject) => {
      const url = new URL(a.url);
      const req = httpRequest(
        {
          host: url.hostname,
          port: url.port,
          method: "POST",
          path: "/v1/chat/completions",
          headers: { "x-api-key": "hang-key-1", "content-type": "application/json" },
        },
        (res) => {
          let text = "";
          res.on("data", (c: Buffer) => {
            text += c.toString();
            // Every content event is in; the usage would be next: leave.
            if ((text.match(/" more"/g) ?? []).length >= 3) {
              res.destroy();
              resolve();
            }
          });
          res.on("error", () => {});
        },
      );
      req.on("error", reject);
      req.end(body);
    });
    await new Promise((r) => setTimeout(r, 300));
    const sent = provider.requests.filter(forTenant("hang")).at(-1)!;
    expect(await sent.outcome).toBe("closed");
    const usage = await usageOf("hang");
    const charged = usage.limits["team.tenant"]!.tokens;
    expect(charged).toBeGreaterThanOrEqual(9050);
    // The reservation: the body's bytes and the ceiling written in.
    expect(charged).toBe(Buffer.byteLength(body) + 9000);
  });

  it('x-model: cheap with "model": "expensive" in the body is limited and priced as expensive', async () => {
    provider.behave = () => ({ prompt: 1000, completion: 1000 });
    const ask = (header: string) =>
      chat(
        "model-key-1",
        { model: "expensive", max_tokens: 1000, messages: [{ role: "user", content: "x" }] },
        undefined,
        {
          "x-model": header,
        },
      );
    expect((await ask("cheap")).status).toBe(200);
    expect((await ask("other")).status).toBe(200);
    // The body's model has had its 2: whatever the header says, the third is refused.
    const third = await ask("cheap");
    expect(third.status).toBe(429);
    expect(third.json<{ error: Record<string, unknown> }>().error["violated-policies"]).toEqual([
      "models.chat",
    ]);
    const usage = await usageOf("model");
    // 2 × (1000 × $30 + 1000 × $60) / 1M = $0.18, not the cheap model's $0.00004.
    expect(usage.limits["models.tenant"]!.usd).toBe(0.18);
  });

  it("an Azure-style path's deployment is the model served: priced and limited as it, whatever the body says", async () => {
    provider.behave = () => ({ prompt: 1000, completion: 1000 });
    const before = (await usageOf("model")).limits["models.tenant"]!.usd!;
    const azure = (model: string) =>
      chat(
        "model-key-2",
        { model, max_tokens: 1000, messages: [{ role: "user", content: "x" }] },
        "/v1/openai/deployments/expensive/chat/completions",
      );
    expect((await azure("cheap")).status).toBe(200);
    expect((await azure("cheap-2")).status).toBe(200);
    // Two of "expensive" already: the body's other names got no bucket of their own.
    expect((await azure("cheap-3")).status).toBe(429);
    const after = (await usageOf("model")).limits["models.tenant"]!.usd!;
    expect(Math.round((after - before) * 1e6)).toBe(2 * 90_000);
  });

  it("a path naming two deployments is refused: the gateway would read the first, an upstream may route by the last", async () => {
    const reply = await chat(
      "model-key-2",
      { model: "cheap", max_tokens: 10, messages: [{ role: "user", content: "x" }] },
      "/v1/openai/deployments/cheap/openai/deployments/expensive/chat/completions",
    );
    expect(reply.status).toBe(400);
    expect(reply.body).toContain("more than one deployment");
  });

  it("a money budget of $1.00 across two instances charges exactly what the reported usage costs", async () => {
    let n = 0;
    provider.behave = () => {
      n++;
      return { prompt: 1000 + n * 7, cached: 200, completion: 3000 + n * 13 };
    };
    const costs: number[] = [];
    for (let i = 0; i < 40; i++) {
      const gateway = i % 2 ? a : b;
      const reply = await send(gateway.url, {
        method: "POST",
        path: "/v1/chat/completions",
        headers: { "x-api-key": `money-key-${(i % 4) + 1}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "gpt-4o",
          max_tokens: 4000,
          messages: [{ role: "user", content: "spend" }],
        }),
      });
      if (reply.status === 429) break;
      expect(reply.status).toBe(200);
      const u = provider.requests.at(-1)!.usage!;
      // gpt-4o: $2.50 input, $1.25 cached input, $10 output, per million tokens.
      const pico = (u.prompt - u.cached) * 2_500_000 + u.cached * 1_250_000 + u.completion * 10_000_000;
      costs.push(Math.ceil(pico / 1_000_000));
    }
    const expected = costs.reduce((x, y) => x + y, 0);
    expect(costs.length).toBeGreaterThan(10);
    expect(expected).toBeLessThanOrEqual(1_000_000);
    const usage = await usageOf("money");
    expect(Math.round(usage.limits["dollars.tenant"]!.usd! * 1_000_000)).toBe(expected);
    // What the store holds is what the ledger says: the budget's remaining, read without consuming.
    const caller = await send(a.adminUrl, {
      path: "/admin/callers/client:money-1",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(caller.status).toBe(200);
  });

  it("an error answer and an upstream never reached give the reservation back, but for the route's cost", async () => {
    provider.behave = () => ({ error: { status: 400, type: "invalid_request_error", message: "bad" } });
    for (let i = 0; i < 5; i++) {
      const reply = await chat("errors-key-1", {
        model: "gpt-4o",
        max_tokens: 5000,
        messages: [{ role: "user", content: "x" }],
      });
      expect(reply.status).toBe(400);
    }
    // Nothing listens there: the request never reached an upstream.
    const unreachable = await chat(
      "errors-key-1",
      { model: "gpt-4o", max_tokens: 5000, messages: [{ role: "user", content: "x" }] },
      "/dead/chat/completions",
    );
    expect(unreachable.status).toBe(502);
    const usage = await usageOf("errors");
    expect(usage.limits["team.tenant"]!.tokens).toBe(6);
    provider.behave = () => ({ prompt: 10, completion: 10 });
    const fine = await chat("errors-key-1", {
      model: "gpt-4o",
      max_tokens: 9000,
      messages: [{ role: "user", content: "x" }],
    });
    expect(fine.status).toBe(200);
  });
});
