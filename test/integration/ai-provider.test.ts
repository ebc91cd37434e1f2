// In front of a real provider (issue 30): the provider's key set from the config (the caller's
// never reaching it, the key in no log, metric or admin answer), and refusals the official SDKs
// understand: a spent budget is a RateLimitError at once, naming the budget and its reset (not a
// day asleep in a retry), while a short rate limit is retried by the SDK and succeeds.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const ADMIN = "ai-provider-admin";
const SECRET = "sk-test-provider-secret-7f3a";

const config = (redisUrl: string, providerUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: "127.0.0.1:0", token: ${ADMIN} }
log: { level: info, requests: true }
store: { url: "${redisUrl}", on_failure: closed }
upstreams:
  openai:
    url: "${providerUrl}"
    request_headers: { set: { authorization: "Bearer \${PROVIDER_KEY}" } }
    response_headers: { remove: [openai-organization], set: { x-served-by: tollgate } }
identity: { api_key: { header: x-api-key, bearer: true } }
clients:
  - { id: spender, key: spender-key, plan: monthly, tenant: spender }
  - { id: quick, key: quick-key, plan: persecond, tenant: quick }
  - { id: claude-spender, key: claude-key, plan: monthly, tenant: claude }
plans:
  monthly:
    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }
  persecond:
    routes:
      chat: { rate: 1/s, burst: 1 }
routes:
  - { name: chat, match: { path: /v1 }, upstream: openai, hide_credentials: true, ai: { format: openai, max_output: 500 } }
  - name: messages
    match: { path: /anthropic/v1/messages }
    upstream: openai
    hide_credentials: true
    ai: { format: anthropic, max_output: 500 }
    # The route's rules win over its upstream's: Anthropic takes its key in x-api-key.
    request_headers: { set: { x-api-key: "\${PROVIDER_KEY}" }, remove: [authorization] }
`;

let redis: RedisProcess;
let provider: FakeProvider;
let gw: InProcessGateway;

beforeAll(async () => {
  redis = await startRedis();
  provider = await startFakeProvider();
  provider.requireKey = SECRET;
  gw = await startGateway(config(redis.url, provider.url), { PROVIDER_KEY: SECRET });
});

afterAll(async () => {
  await gw?.stop();
  await provider?.close();
  await redis?.stop();
});

describe("the provider's credential", () => {
  it("reaches the provider from the config; the caller's key and Authorization never do; the secret is in no log, metric or admin answer", async () => {
    provider.behave = () => ({ prompt: 5, completion: 5 });
    const reply = await send(gw.url, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: {
        "x-api-key": "quick-key",
        authorization: "Bearer the-callers-own-provider-key",
        "content-type": "application/json",
      },
      body: '{"model":"m","max_completion_tokens":5}',
    });
    expect(reply.status).toBe(200);
    const seen = provider.requests.at(-1)!;
    expect(seen.headers.authorization).toBe(`Bearer ${SECRET}`);
    expect(seen.headers["x-api-key"]).toBeUndefined();
    expect(JSON.stringify(seen.headers)).not.toContain("callers-own");
    // Anthropic's key goes in x-api-key, which is also the gateway's: the caller's is hidden, the
    // provider's set; a spelling an upstream folds onto it (CGI reads x_api_key so) is dropped.
    provider.requireKey = undefined;
    const anthropic = await send(gw.url, {
      method: "POST",
      path: "/anthropic/v1/messages",
      headers: {
        "x-api-key": "spender-key",
        x_api_key: "spelled-to-slip-through",
        "content-type": "application/json",
      },
      body: '{"model":"claude","max_tokens":5}',
    });
    provider.requireKey = SECRET;
    expect(anthropic.status).toBe(200);
    const viaAnthropic = provider.requests.at(-1)!;
    expect(viaAnthropic.headers["x-api-key"]).toBe(SECRET);
    expect(viaAnthropic.headers.authorization).toBeUndefined();
    expect(JSON.stringify(viaAnthropic.headers)).not.toContain("slip-through");
    // The answer's header rules: one removed, one set.
    expect(reply.headers["x-served-by"]).toBe("tollgate");

    const admin = await send(gw.adminUrl, {
      path: "/admin/config",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(admin.json<{ routes: { request_headers: unknown }[] }>().routes[0]!.request_headers).toEqual({
      set: { authorization: "set" },
      remove: [],
    });
    const metrics = await send(gw.adminUrl, { path: "/metrics" });
    for (const text of [admin.body, metrics.body, JSON.stringify(gw.logs.lines)])
      expect(text).not.toContain(SECRET);
  });
});

describe("refusals the SDKs understand", () => {
  it("openai, default retries: a spent monthly budget is a RateLimitError within 2 s naming the budget and its reset", async () => {
    provider.behave = () => ({ prompt: 10, completion: 500 });
    const client = new OpenAI({ apiKey: "spender-key", baseURL: `${gw.url}/v1` });
    await client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "x" }] });
    const started = performance.now();
    const err = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const e = err as InstanceType<typeof OpenAI.RateLimitError>;
    expect(e.message).toMatch(/monthly\.tenant/);
    expect(e.message).toMatch(/Retry in \d+ s \(at \d{4}-\d\d-01T00:00:00\.000Z\)/);
    expect(e.code).toBe("insufficient_quota");
    expect(e.type).toBe("insufficient_quota");
    expect(e.headers.get("x-should-retry")).toBe("false");
    expect(Number(e.headers.get("retry-after-ms"))).toBeGreaterThan(60_000);

    // The next refusals come from this instance's deny cache, without asking the store: they
    // still tell the budget's real wait (they said Retry-After: 1, and the SDK retried at once).
    const again = await send(gw.url, {
      path: "/v1/chat/completions",
      method: "POST",
      headers: { authorization: "Bearer spender-key", "content-type": "application/json" },
      body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "x" }] }),
    });
    expect(again.status).toBe(429);
    expect(again.headers["x-should-retry"]).toBe("false");
    expect(Number(again.headers["retry-after"])).toBeGreaterThan(60);
    expect(Number(again.headers["retry-after-ms"])).toBeGreaterThan(60_000);
  });

  it("openai, default retries: a 1 s rate limit is retried by the SDK and succeeds", async () => {
    provider.behave = () => ({ prompt: 5, completion: 5 });
    const client = new OpenAI({ apiKey: "quick-key", baseURL: `${gw.url}/v1` });
    const before = provider.requests.length;
    const started = performance.now();
    const [a, b] = await Promise.all([
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "one" }] }),
      client.chat.completions.create({ model: "m", messages: [{ role: "user", content: "two" }] }),
    ]);
    expect(a.choices.length + b.choices.length).toBe(2);
    // One waited out the second it was told, and was not refused again.
    expect(performance.now() - started).toBeGreaterThan(500);
    expect(provider.requests.length - before).toBe(2);
  });

  it("@anthropic-ai/sdk, default retries: a spent budget is a RateLimitError naming the budget, in Anthropic's error shape", async () => {
    provider.behave = () => ({ prompt: 10, completion: 500 });
    const client = new Anthropic({ apiKey: "claude-key", baseURL: `${gw.url}/anthropic` });
    await client.messages.create({
      model: "claude",
      max_tokens: 500,
      messages: [{ role: "user", content: "x" }],
    });
    const started = performance.now();
    const err = await client.messages
      .create({ model: "claude", max_tokens: 500, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect(e.message).toMatch(/monthly\.tenant/);
    expect((e.error as { error: { type: string } }).error.type).toBe("rate_limit_error");
  });
});
