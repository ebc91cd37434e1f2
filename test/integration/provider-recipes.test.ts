// The provider recipes of docs/providers.md, each its config file in config/examples/ run as
// written (only the environment it names set): a key issued through the admin API, the
// provider's own npm SDK calling through the gateway (JSON and a stream) to a local fake of the
// provider's wire format that demands the provider's key, the usage on /admin/usage, and a spent
// budget refused at once in the provider's error shape the SDK reads.
import { readFileSync } from "node:fs";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const ADMIN_TOKEN = "recipe-admin-token";
const PROVIDER_KEY = "sk-provider-secret-2b8e";
const example = (name: string) =>
  readFileSync(new URL(`../../config/examples/${name}`, import.meta.url), "utf8");

let redis: RedisProcess;
let provider: FakeProvider;

beforeAll(async () => {
  redis = await startRedis();
  provider = await startFakeProvider();
  provider.requireKey = PROVIDER_KEY;
});
afterAll(async () => {
  await provider?.close();
  await redis?.stop();
});

async function recipe(file: string, env: Record<string, string>): Promise<InProcessGateway> {
  return startGateway(example(file), {
    LISTEN: "127.0.0.1:0",
    ADMIN_LISTEN: "127.0.0.1:0",
    ADMIN_TOKEN,
    REDIS_URL: redis.url,
    ...env,
  });
}

async function admin(gw: InProcessGateway, method: string, path: string, body?: unknown) {
  const r = await send(gw.adminUrl, {
    method,
    path,
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: r.status, body: r.json<Record<string, unknown>>() };
}

/** A key for a new tenant on plan team, issued as an operator would (tollgate keys create). */
async function issue(gw: InProcessGateway, tenant: string): Promise<string> {
  const created = await admin(gw, "POST", "/admin/keys", { client: `${tenant}-app`, plan: "team", tenant });
  expect(created.status).toBe(201);
  return String(created.body.key);
}

/** The tenant's budget shrunk to `limit` (its unit) for the test, through the admin API. */
async function shrink(gw: InProcessGateway, tenant: string, limit: number, window: string) {
  const r = await admin(gw, "PUT", `/admin/overrides/tenant:${tenant}/team.tenant`, {
    limit,
    window,
    expires_in: "1h",
    reason: "recipe test",
  });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

function expectOnlyTheProvidersKey(callerKey: string) {
  const seen = provider.requests.at(-1)!;
  expect(JSON.stringify(seen.headers)).not.toContain(callerKey);
  return seen;
}

describe("recipe: OpenAI (config/examples/openai.yaml)", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await recipe("openai.yaml", { OPENAI_BASE_URL: provider.url, OPENAI_API_KEY: PROVIDER_KEY });
  });
  afterAll(() => gw?.stop());

  it("meters chat, a stream, embeddings and responses through the openai SDK, with the provider's key", async () => {
    provider.behave = () => ({ prompt: 20, completion: 30 });
    const key = await issue(gw, "acme");
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1` });
    const chat = await client.chat.completions.create({
      model: "gpt-4o-mini",
      messages: [{ role: "user", content: "hello" }],
    });
    expect(chat.usage?.completion_tokens).toBe(30);
    expect(expectOnlyTheProvidersKey(key).headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    const stream = await client.chat.completions.create({
      model: "gpt-4o",
      messages: [{ role: "user", content: "stream" }],
      stream: true,
    });
    let chunks = 0;
    for await (const _ of stream) chunks++;
    expect(chunks).toBeGreaterThan(1);
    // The gateway asked for the usage the client did not.
    expect(provider.requests.at(-1)!.body.stream_options).toEqual({ include_usage: true });
    await client.embeddings.create({ model: "text-embedding-3-small", input: "embed me" });
    const response = await client.responses.create({ model: "gpt-4.1-mini", input: "hi" });
    expect(response.usage?.output_tokens).toBe(30);
    const usage = await admin(gw, "GET", "/admin/usage/tenant:acme");
    const spent = (usage.body.limits as Record<string, { requests: number; usd?: number }>)["team.tenant"]!;
    expect(spent.requests).toBe(4);
    expect(spent.usd).toBeGreaterThan(0);
  });

  it("a spent budget is the SDK's RateLimitError at once, insufficient_quota, naming the budget", async () => {
    provider.behave = () => ({ prompt: 20, completion: 4000 });
    const key = await issue(gw, "spent");
    await shrink(gw, "spent", 0.01, "1 month");
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1` });
    await client.chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] });
    const started = performance.now();
    const err = await client.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] })
      .catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    const e = err as InstanceType<typeof OpenAI.RateLimitError>;
    expect(e.code).toBe("insufficient_quota");
    expect(e.message).toContain("team.tenant");
  });
});

describe("recipe: Anthropic (config/examples/anthropic.yaml)", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await recipe("anthropic.yaml", {
      ANTHROPIC_BASE_URL: provider.url,
      ANTHROPIC_API_KEY: PROVIDER_KEY,
    });
  });
  afterAll(() => gw?.stop());

  it("meters messages and a stream through @anthropic-ai/sdk, with the provider's x-api-key; count_tokens is free", async () => {
    provider.behave = () => ({ prompt: 20, completion: 25 });
    const key = await issue(gw, "claude-co");
    const client = new Anthropic({ apiKey: key, baseURL: gw.url });
    const message = await client.messages.create({
      model: "claude-sonnet-4-5",
      max_tokens: 1000,
      messages: [{ role: "user", content: "hello" }],
    });
    expect(message.usage.output_tokens).toBe(25);
    const seen = expectOnlyTheProvidersKey(key);
    expect(seen.headers["x-api-key"]).toBe(PROVIDER_KEY);
    expect(seen.headers.authorization).toBeUndefined();
    const stream = client.messages.stream({
      model: "claude-haiku-4-5",
      max_tokens: 1000,
      messages: [{ role: "user", content: "stream" }],
    });
    const final = await stream.finalMessage();
    expect(final.usage.output_tokens).toBe(25);
    const counted = await client.messages.countTokens({
      model: "claude-sonnet-4-5",
      messages: [{ role: "user", content: "count" }],
    });
    expect(counted.input_tokens).toBeGreaterThan(0);
    const usage = await admin(gw, "GET", "/admin/usage/tenant:claude-co");
    const spent = (usage.body.limits as Record<string, { requests: number; usd?: number }>)["team.tenant"]!;
    expect(spent.requests).toBe(3);
    expect(spent.usd).toBeGreaterThan(0);
  });

  it("a spent budget is the SDK's RateLimitError at once, in Anthropic's error shape", async () => {
    provider.behave = () => ({ prompt: 20, completion: 4000 });
    const key = await issue(gw, "claude-spent");
    await shrink(gw, "claude-spent", 0.01, "1 month");
    const client = new Anthropic({ apiKey: key, baseURL: gw.url });
    const ask = () =>
      client.messages.create({
        model: "claude-opus-4-1",
        max_tokens: 4000,
        messages: [{ role: "user", content: "x" }],
      });
    const first = await ask().catch((e: unknown) => e);
    const started = performance.now();
    const err = first instanceof Anthropic.RateLimitError ? first : await ask().catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(err).toBeInstanceOf(Anthropic.RateLimitError);
    const e = err as InstanceType<typeof Anthropic.RateLimitError>;
    expect((e.error as { error: { type: string } }).error.type).toBe("rate_limit_error");
    expect(e.message).toContain("team.tenant");
  });
});

describe("recipe: a self-hosted OpenAI-compatible server (config/examples/self-hosted.yaml)", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await recipe("self-hosted.yaml", { LLM_URL: provider.url, LLM_API_KEY: PROVIDER_KEY });
  });
  afterAll(() => gw?.stop());

  it("meters tokens per model through the openai SDK; the daily budget refuses with insufficient_quota", async () => {
    provider.behave = () => ({ prompt: 50, completion: 100 });
    const key = await issue(gw, "lab");
    const client = new OpenAI({ apiKey: key, baseURL: `${gw.url}/v1`, maxRetries: 2 });
    const chat = await client.chat.completions.create({
      model: "meta-llama/Llama-3.1-8B-Instruct",
      messages: [{ role: "user", content: "hello" }],
    });
    expect(chat.usage?.total_tokens).toBe(150);
    expect(expectOnlyTheProvidersKey(key).headers.authorization).toBe(`Bearer ${PROVIDER_KEY}`);
    const completion = await client.completions.create({ model: "qwen2.5:7b", prompt: "once upon" });
    expect(completion.usage?.completion_tokens).toBe(16); // the legacy endpoint's default ceiling
    const usage = await admin(gw, "GET", "/admin/usage/tenant:lab");
    const spent = (usage.body.limits as Record<string, { tokens: number; requests: number }>)["team.tenant"]!;
    expect(spent).toMatchObject({
      requests: 2,
      tokens: 150 + chat.usage!.total_tokens - 150 + completion.usage!.total_tokens,
    });

    await shrink(gw, "lab", 300, "1 day");
    const started = performance.now();
    const err = await client.chat.completions
      .create({ model: "meta-llama/Llama-3.1-8B-Instruct", messages: [{ role: "user", content: "more" }] })
      .catch((e: unknown) => e);
    expect(performance.now() - started).toBeLessThan(2000);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect((err as InstanceType<typeof OpenAI.RateLimitError>).code).toBe("insufficient_quota");
  });
});
