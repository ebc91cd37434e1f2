// What a plan includes (`plans.<plan>.allow`): a route or model outside it is a 403
// not-entitled naming what the plan allows, decided before any limit is charged, in the
// provider's error shape on AI routes (the official `openai` SDK throws PermissionDeniedError
// with that message and does not retry), and shown in /admin/callers. Before, the only way to
// write it was `limit: 0`, a 429 "quota exceeded" that clients retry.
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const ADMIN = "entitlements-admin-token";
let provider: FakeProvider;
let upstream: TestUpstream;
let gw: InProcessGateway;

beforeAll(async () => {
  provider = await startFakeProvider();
  upstream = await startUpstream();
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${ADMIN} }
log: { level: warn, requests: false }
store: { url: "memory://" }
upstreams: { provider: ${provider.url}, api: ${upstream.url} }
clients:
  - { id: small, key: small-key, plan: starter }
  - { id: big, key: big-key, plan: pro }
plans:
  starter:
    allow: { routes: [openai, anthropic], models: ["gpt-4o-mini*", "claude-3-5-haiku-*"] }
    # Two requests a day: a refusal that charged would spend them.
    global: { algorithm: fixed_window, limit: 2, window: 1d }
  pro:
    global: { rate: 100/s, burst: 100 }
routes:
  - { name: openai, match: { path: /v1/chat }, upstream: provider, ai: { format: openai, max_output: 100 } }
  - { name: anthropic, match: { path: /v1/messages }, upstream: provider, ai: { format: anthropic, max_output: 100 } }
  - { name: reports, match: { path: /reports }, upstream: api }
`);
});
afterAll(async () => {
  await gw?.stop();
  await provider?.close();
  await upstream?.close();
});

const openai = (key: string) =>
  new OpenAI({
    apiKey: "sk-x",
    baseURL: `${gw.url}/v1`,
    defaultHeaders: { "x-api-key": key },
    maxRetries: 2,
  });

describe("plans.<plan>.allow", () => {
  it("refuses a model outside the plan with 403 in OpenAI's shape; the SDK neither retries nor charges", async () => {
    const before = provider.requests.length;
    const err = await openai("small-key")
      .chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const denied = err as InstanceType<typeof OpenAI.PermissionDeniedError>;
    expect(denied.status).toBe(403);
    expect(denied.message).toContain('plan "starter" does not include model "gpt-4o"');
    expect(denied.message).toContain("gpt-4o-mini*, claude-3-5-haiku-*");
    expect(denied.code).toBe("not_entitled");
    expect(provider.requests.length).toBe(before);

    // Two allowed requests still fit the day's two: nothing was charged for the refusals.
    for (let i = 0; i < 2; i++) {
      const ok = await openai("small-key").chat.completions.create({
        model: "gpt-4o-mini-2024-07-18",
        messages: [{ role: "user", content: "hi" }],
      });
      expect(ok.choices.length).toBeGreaterThan(0);
    }
    const third = await openai("small-key")
      .chat.completions.create({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(third).toBeInstanceOf(OpenAI.RateLimitError);
  });

  it("answers Anthropic's SDK in its shape (permission_error)", async () => {
    const anthropic = new Anthropic({
      apiKey: "sk-ant-x",
      baseURL: gw.url,
      defaultHeaders: { "x-api-key": "small-key" },
      maxRetries: 2,
    });
    const err = await anthropic.messages
      .create({ model: "claude-opus-4-1", max_tokens: 10, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.PermissionDeniedError);
    const body = (err as InstanceType<typeof Anthropic.APIError>).error as {
      error: { type: string; message: string };
    };
    expect(body.error.type).toBe("permission_error");
    expect(body.error.message).toContain('does not include model "claude-opus-4-1"');
  });

  it("refuses a route outside the plan with a problem naming the routes it includes", async () => {
    const reply = await send(gw.url, { path: "/reports/1", headers: { "x-api-key": "small-key" } });
    expect(reply.status).toBe(403);
    expect(reply.headers["content-type"]).toContain("application/problem+json");
    const problem = reply.json();
    expect(problem.type).toBe("https://tollgate.dev/problems/not-entitled");
    expect(problem.detail).toBe(
      'plan "starter" does not include route "reports"; it includes the routes openai, anthropic',
    );
    expect(reply.headers["retry-after"]).toBeUndefined();
    // A plan without allow includes everything.
    const pro = await send(gw.url, { path: "/reports/1", headers: { "x-api-key": "big-key" } });
    expect(pro.status).toBe(200);
  });

  it("is shown in /admin/callers", async () => {
    const view = await send(gw.adminUrl, {
      path: "/admin/callers/client:small",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(view.json().allow).toEqual({
      routes: ["openai", "anthropic"],
      models: ["gpt-4o-mini*", "claude-3-5-haiku-*"],
    });
    const pro = await send(gw.adminUrl, {
      path: "/admin/callers/client:big",
      headers: { authorization: `Bearer ${ADMIN}` },
    });
    expect(pro.json().allow).toBeUndefined();
  });
});
