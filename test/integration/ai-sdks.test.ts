// The official SDKs through AI routes (issue 29): the `openai` and `@anthropic-ai/sdk` npm
// packages call a gateway in front of the fake provider (test/support/ai-provider.ts), JSON and
// streaming. They read every answer as they read the provider's own (the usage chunk the gateway
// asked for included), and each request is charged exactly the usage the provider reported.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const ADMIN = "ai-sdks-admin";

const config = (redisUrl: string, providerUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: "127.0.0.1:0", token: ${ADMIN} }
log: { level: warn, requests: false }
store: { url: "${redisUrl}", on_failure: closed }
models:
  gpt-4o: { input: 2.5, cached_input: 1.25, output: 10 }
  claude-sonnet-4*: { input: 3, cached_input: 0.3, cache_write: 3.75, output: 15 }
upstreams:
  provider: { url: "${providerUrl}", timeout: 30s }
clients:
  - { id: sdk-openai, key: sdk-openai-key, plan: team, tenant: t-openai }
  - { id: sdk-anthropic, key: sdk-anthropic-key, plan: team, tenant: t-anthropic }
  - { id: sdk-poor, key: sdk-poor-key, plan: poor, tenant: t-poor }
plans:
  team:
    tenant: { algorithm: fixed_window, limit: 100, window: 1 month, unit: usd }
    routes:
      openai: { rate: 1000000/m, burst: 1000000, unit: tokens, by: [caller, "body:model"] }
  poor:
    tenant: { algorithm: fixed_window, limit: 500, window: 1 month, unit: tokens }
routes:
  - { name: openai, match: { path: /v1 }, upstream: provider, hide_credentials: true, ai: { format: openai, max_output: 1000 } }
  - { name: responses, match: { path: /v1/responses }, upstream: provider, hide_credentials: true, ai: { format: responses, max_output: 1000 } }
  - { name: anthropic, match: { path: /v1/messages }, upstream: provider, hide_credentials: true, ai: { format: anthropic, max_output: 1000 } }
`;

let redis: RedisProcess;
let provider: FakeProvider;
let gw: InProcessGateway;
let openai: OpenAI;
let anthropic: Anthropic;

beforeAll(async () => {
  redis = await startRedis();
  provider = await startFakeProvider();
  gw = await startGateway(config(redis.url, provider.url));
  // The gateway's key in x-api-key (hidden from the provider); the SDK's own Authorization passes.
  openai = new OpenAI({
    apiKey: "sk-provider",
    baseURL: `${gw.url}/v1`,
    defaultHeaders: { "x-api-key": "sdk-openai-key" },
    maxRetries: 0,
  });
  // This SDK sends its apiKey as Authorization: Bearer; the gateway's key goes in x-api-key.
  anthropic = new Anthropic({
    apiKey: "sk-ant-provider",
    baseURL: gw.url,
    defaultHeaders: { "x-api-key": "sdk-anthropic-key" },
    maxRetries: 0,
  });
});

afterAll(async () => {
  await gw?.stop();
  await provider?.close();
  await redis?.stop();
});

async function usage(tenant: string) {
  await new Promise((r) => setTimeout(r, 50));
  const period = new Date().toISOString().slice(0, 7);
  const reply = await send(gw.adminUrl, {
    path: `/admin/usage/tenant:${tenant}?period=${period}`,
    headers: { authorization: `Bearer ${ADMIN}` },
  });
  return reply.json<{ limits: Record<string, { tokens: number; requests: number; usd?: number }> }>().limits;
}

const last = () => provider.requests.at(-1)!;

describe("the openai package through an AI route", () => {
  it("chat completions, JSON and streamed without include_usage, embeddings and the Responses API: each charged what was reported", async () => {
    provider.behave = () => ({ prompt: 40, cached: 10, completion: 25 });
    const json = await openai.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "Count to three." }],
    });
    expect(json.usage).toMatchObject({ prompt_tokens: 40, completion_tokens: 25 });
    expect(last().headers["x-api-key"]).toBeUndefined();
    expect(last().headers.authorization).toBe("Bearer sk-provider");
    expect(last().body.max_completion_tokens).toBe(1000);

    const stream = await openai.chat.completions.create({
      model: "gpt-4o",
      stream: true,
      messages: [{ role: "user", content: "Count to three, streamed." }],
    });
    let text = "";
    let streamed: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      if (chunk.usage) streamed = chunk.usage;
    }
    expect(text.length).toBeGreaterThan(0);
    // The SDK reads the usage chunk the gateway asked for on the client's behalf.
    expect(streamed).toMatchObject({ prompt_tokens: 40, completion_tokens: 25 });
    expect(last().body.stream_options).toEqual({ include_usage: true });

    const embedding = await openai.embeddings.create({ model: "gpt-4o", input: "a vector, please" });
    expect(embedding.usage.prompt_tokens).toBe(40);

    const response = await openai.responses.create({ model: "gpt-4o", input: "Say hi." });
    expect(response.usage).toMatchObject({ input_tokens: 40, output_tokens: 25 });
    expect(last().body.max_output_tokens).toBe(1000);
    const events = await openai.responses.create({
      model: "gpt-4o",
      input: "Say hi, streamed.",
      stream: true,
    });
    let completed: unknown;
    for await (const e of events) if (e.type === "response.completed") completed = e.response.usage;
    expect(completed).toMatchObject({ input_tokens: 40, output_tokens: 25 });

    const limits = await usage("t-openai");
    // Five requests, four generating 25: 5 × 40 + 4 × 25 tokens; dollars at gpt-4o's prices.
    expect(limits["team.tenant"]).toMatchObject({ requests: 5, tokens: 5 * 40 + 4 * 25 });
    // (30 × 2.5 + 10 × 1.25 + 25 × 10) µ$ = 337.5 → 338 µ$ per completion; an embedding, which
    // reports no cached tokens, 40 × 2.5 = 100 µ$.
    expect(limits["team.tenant"]!.usd).toBe((4 * 338 + 100) / 1_000_000);
  });

  it("a spent budget is a RateLimitError the SDK can read, and the provider never sees the request", async () => {
    provider.behave = () => ({ prompt: 10, completion: 400 });
    const poor = new OpenAI({
      apiKey: "sk-provider",
      baseURL: `${gw.url}/v1`,
      defaultHeaders: { "x-api-key": "sdk-poor-key" },
      maxRetries: 0,
    });
    const before = provider.requests.length;
    await poor.chat.completions.create({
      model: "gpt-4o",
      max_tokens: 400,
      messages: [{ role: "user", content: "x" }],
    });
    const refused = await poor.chat.completions
      .create({ model: "gpt-4o", max_tokens: 400, messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(OpenAI.RateLimitError);
    expect(provider.requests.length).toBe(before + 1);
  });
});

describe("the @anthropic-ai/sdk package through an AI route", () => {
  it("messages, JSON and streamed, and token counting: each charged what was reported, cache tokens priced apart", async () => {
    provider.behave = () => ({ prompt: 60, cached: 100, cacheWrite: 20, completion: 30 });
    const message = await anthropic.messages.create({
      model: "claude-sonnet-4-5",
      max_tokens: 500,
      messages: [{ role: "user", content: "Hello, Claude." }],
    });
    expect(message.usage).toMatchObject({ input_tokens: 60, output_tokens: 30 });
    // The gateway's key never reaches the provider.
    expect(last().headers["x-api-key"]).toBeUndefined();

    const stream = anthropic.messages.stream({
      model: "claude-sonnet-4-5",
      max_tokens: 500,
      messages: [{ role: "user", content: "Hello again, streamed." }],
    });
    let text = "";
    stream.on("text", (t) => {
      text += t;
    });
    const final = await stream.finalMessage();
    expect(text.length).toBeGreaterThan(0);
    expect(final.usage).toMatchObject({ input_tokens: 60, output_tokens: 30 });

    const counted = await anthropic.messages.countTokens({
      model: "claude-sonnet-4-5",
      messages: [{ role: "user", content: "How many?" }],
    });
    expect(counted.input_tokens).toBe(60);

    const limits = await usage("t-anthropic");
    // Two messages of 60 + 100 + 20 + 30 tokens; token counting is free.
    expect(limits["team.tenant"]).toMatchObject({ requests: 3, tokens: 2 * 210 });
    // 60 × 3 + 100 × 0.3 + 20 × 3.75 + 30 × 15 = 735 µ$ each.
    expect(limits["team.tenant"]!.usd).toBe((2 * 735) / 1_000_000);
  });
});
