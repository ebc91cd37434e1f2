// Charging what the upstream reports (route `charge`): Tollgate-Cost in the head or the
// trailers, token usage in a JSON body or an event stream read as it passes, token budgets
// (unit: tokens) charged apart from the limits that count requests, max_cost refused up front,
// the usage ledger and the budget alert.
import type { ServerResponse } from "node:http";
import { request } from "node:http";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const config = (upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: admin-secret }
log: { level: info }
store: { url: "memory://" }
calendar: { tz: UTC, alert_at: 50% }
upstreams: { llm: ${upstreamUrl} }
clients:
  - { id: alice, key: ka, plan: p, tenant: acme }
  - { id: bob, key: kb, plan: p, tenant: acme }
plans:
  p:
    global: { limit: 100, window: 1h }
    tenant: { algorithm: fixed_window, limit: 1000, window: 1 month, unit: tokens }
routes:
  - { name: chat, match: { path: /chat }, upstream: llm, charge: usage, max_cost: 300 }
  - { name: both, match: { path: /both }, upstream: llm, charge: [header, usage] }
  - { name: header, match: { path: /header }, upstream: llm }
`;

/** The upstream answers each request with `next` (set by the test). */
let answer: (res: ServerResponse) => void = (res) => res.end("{}");
let upstream: TestUpstream;
let gw: InProcessGateway;

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.handle = (_req, res) => answer(res);
});
afterAll(async () => {
  await upstream.close();
});
// Each test starts from a fresh gateway: a fresh in-process store and ledger.
beforeEach(async () => {
  gw = await startGateway(config(upstream.url));
});
afterEach(async () => {
  await gw.stop();
});

const json = (usage: unknown) => (res: ServerResponse) => {
  const body = JSON.stringify({ id: "x", choices: [{ message: { content: "hi" } }], usage });
  res.writeHead(200, { "content-type": "application/json" });
  res.end(body);
};

const remaining = async (key: string, path = "/header") => {
  answer = (res) => res.end("{}");
  const r = await send(gw.url, { path, headers: { "x-api-key": key } });
  return r.headers["ratelimit"] as string;
};

/**
 * POSTs /chat as alice and reads the streamed answer as it comes; `leaveWhen` sees the text so
 * far after each chunk, and true makes the client hang up there. Resolves with the text read.
 */
function streamChat(leaveWhen: (text: string) => boolean): Promise<string> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(gw.url);
    const req = request({
      port,
      host: "127.0.0.1",
      path: "/chat",
      method: "POST",
      headers: { "x-api-key": "ka" },
    });
    let text = "";
    req.on("response", (res) => {
      res.on("data", (c: Buffer) => {
        text += c.toString();
        if (leaveWhen(text)) {
          req.destroy();
          resolve(text);
        }
      });
      res.on("end", () => resolve(text));
    });
    req.on("error", (err) => (req.destroyed ? resolve(text) : reject(err)));
    req.end();
  });
}

/** RateLimit (ietf) remaining of one limit name: `"acme…";r=N`. */
function remainingOf(header: string | undefined, name: string): number {
  const m = new RegExp(`"${name.replace(".", "\\.")}";r=(\\d+)`).exec(header ?? "");
  if (!m) throw new Error(`no ${name} in ${header}`);
  return Number(m[1]);
}

describe("charge: usage", () => {
  it("charges the tokens of a JSON body to the token budget, and only a request to the request limit", async () => {
    answer = json({ prompt_tokens: 40, completion_tokens: 60, total_tokens: 100 });
    const r = await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    expect(r.status).toBe(200);
    const after = await remaining("kb");
    // The tenant budget: 1000 - 100 (alice's tokens) - 1 (this request's cost).
    expect(remainingOf(after, "p.tenant")).toBe(899);
    // bob's own request limit counted one request, untouched by alice's tokens.
    expect(remainingOf(after, "p.global")).toBe(99);
  });
});

const sse = (events: readonly unknown[]) => (res: ServerResponse) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  for (const e of events) res.write(`data: ${JSON.stringify(e)}\n\n`);
  res.end("data: [DONE]\n\n");
};

describe("charge: usage from an event stream", () => {
  it("passes the first event on before the upstream has sent the rest, and charges the final usage", async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((r) => {
      release = r;
    });
    answer = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: "a" } }] })}\n\n`);
      void released.then(() => {
        res.write(`data: ${JSON.stringify({ choices: [], usage: { total_tokens: 250 } })}\n\n`);
        res.end("data: [DONE]\n\n");
      });
    };
    const body = await streamChat((text) => {
      // The first event arrived while the upstream still holds the rest.
      if (text.includes('"a"')) release();
      return false;
    });
    expect(body).toContain("[DONE]");
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 250 - 1);
  });

  it("sums Anthropic's input tokens (message_start) and cumulative output tokens (message_delta)", async () => {
    answer = sse([
      { type: "message_start", message: { usage: { input_tokens: 30, output_tokens: 1 } } },
      { type: "message_delta", usage: { output_tokens: 10 } },
      { type: "message_delta", usage: { output_tokens: 70 } },
    ]);
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 100 - 1);
  });

  it("charges a client that leaves mid-stream what the upstream had reported", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(
        `data: ${JSON.stringify({ type: "message_start", message: { usage: { input_tokens: 120 } } })}\n\n`,
      );
      res.write(`data: ${JSON.stringify({ type: "message_delta", usage: { output_tokens: 80 } })}\n\n`);
      // Never ends: the client leaves.
    };
    await streamChat((text) => text.includes("output_tokens"));
    await expect.poll(async () => remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 200 - 1);
  });
});

describe("charge: header", () => {
  it("reads Tollgate-Cost from the trailers", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-type": "text/plain", trailer: "Tollgate-Cost" });
      res.write("partial ");
      res.addTrailers({ "Tollgate-Cost": "400" });
      res.end("done");
    };
    const r = await send(gw.url, { path: "/header", headers: { "x-api-key": "ka" } });
    expect(r.body).toBe("partial done");
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 400 - 1);
  });

  it("charge: header ignores usage in the body; charge: usage ignores the header", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-type": "application/json", "tollgate-cost": "50" });
      res.end(JSON.stringify({ usage: { total_tokens: 300 } }));
    };
    await send(gw.url, { path: "/header", headers: { "x-api-key": "ka" } });
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 50 - 1);
    answer = (res) => {
      res.writeHead(200, { "content-type": "application/json", "tollgate-cost": "50" });
      res.end(JSON.stringify({ usage: { total_tokens: 300 } }));
    };
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 50 - 1 - 300 - 1);
  });

  it("[header, usage]: the header, when present, is the request's cost", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-type": "application/json", "tollgate-cost": "20" });
      res.end(JSON.stringify({ usage: { total_tokens: 300 } }));
    };
    const r = await send(gw.url, { path: "/both", headers: { "x-api-key": "ka" } });
    // Charged before the head left: the response itself shows what is left.
    expect(remainingOf(r.headers.ratelimit as string, "p.tenant")).toBe(1000 - 20);
  });
});

describe("token budgets", () => {
  it("refuses up front a request the budget cannot take max_cost of, naming the budget and its reset", async () => {
    answer = json({ total_tokens: 750 });
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    // 1000 - 750 = 250 left: /chat declares max_cost 300.
    const refused = await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "kb" } });
    expect(refused.status).toBe(429);
    expect(refused.body).toContain("p.tenant");
    expect(refused.body).toMatch(/tokens per calendar month/);
    // The budget resets at 00:00 UTC on the 1st of next month: the body names that instant.
    const reset = Date.UTC(new Date().getUTCFullYear(), new Date().getUTCMonth() + 1, 1);
    expect(refused.json<{ retry_at: string }>().retry_at).toBe(new Date(reset).toISOString());
    const retryAfter = Number(refused.headers["retry-after"]);
    expect(Math.abs(Date.now() + retryAfter * 1000 - reset)).toBeLessThan(5000);
    // A route without max_cost still gets in: the budget is not exhausted.
    expect((await send(gw.url, { path: "/header", headers: { "x-api-key": "kb" } })).status).toBe(200);
  });

  it("never gives back: a report below the route's cost takes the cost; a hostile one is no report", async () => {
    answer = json({ total_tokens: 0 });
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 1 - 1);
    // -5, 1.5 and "900" are not token counts: each answer is charged the route's max_cost.
    for (const usage of [{ total_tokens: -5 }, { total_tokens: 1.5 }, { total_tokens: "900" }]) {
      answer = json(usage);
      await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    }
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 2 - 900 - 1);
  });
});

describe("usage and alerts", () => {
  it("records tokens and requests per budget, per caller and per tenant; alerts once past alert_at", async () => {
    answer = json({ total_tokens: 300 });
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "kb" } });
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "kb" } });
    const period = new Date().toISOString().slice(0, 7);
    const auth = { authorization: "Bearer admin-secret" };
    const alice = await send(gw.adminUrl, {
      path: `/admin/usage/client:alice?period=${period}`,
      headers: auth,
    });
    expect(alice.status).toBe(200);
    expect(alice.json()).toMatchObject({
      caller: "client:alice",
      period,
      limits: { "p.tenant": { tokens: 300, requests: 1 } },
    });
    const tenant = await send(gw.adminUrl, {
      path: `/admin/usage/tenant:acme?period=${period}`,
      headers: auth,
    });
    expect(tenant.json()).toMatchObject({ limits: { "p.tenant": { tokens: 900, requests: 3 } } });
    // 50 % of 1000: crossed by bob's first request (301 → 602), once.
    const alerts = gw.logs.lines.filter((l) => String(l.msg).startsWith("budget alert"));
    expect(alerts).toHaveLength(1);
    expect(alerts[0]).toMatchObject({ limit: "p.tenant", caller: "client:bob", period });
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_budget_alerts_total\{limit="p\.tenant",event="budget\.threshold"\} 1/);
    expect(metrics).toMatch(/tollgate_charged_units_total\{route="chat"\} 900/);
  });
});

describe("a body the gateway must be able to read", () => {
  it("asks the upstream for identity encoding on a usage route, whatever the client asked", async () => {
    answer = json({ total_tokens: 10 });
    const { received } = upstream;
    const before = received.length;
    await send(gw.url, {
      path: "/chat",
      method: "POST",
      headers: { "x-api-key": "ka", "accept-encoding": "gzip, br", accept_encoding: "gzip" },
    });
    const seen = received[before]!;
    expect(seen.headers["accept-encoding"]).toBe("identity");
    expect(
      seen.rawHeaders.filter((h) => h.toLowerCase().replaceAll("_", "-") === "accept-encoding"),
    ).toHaveLength(1);
    // Other routes pass the client's own.
    await send(gw.url, { path: "/header", headers: { "x-api-key": "ka", "accept-encoding": "gzip" } });
    expect(received[before + 1]!.headers["accept-encoding"]).toBe("gzip");
  });

  it("charges max_cost for a compressed body it cannot read, and says so", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
      res.end(Buffer.from([0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0]));
    };
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 300 - 1);
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_usage_unreported_total\{route="chat",reason="compressed"\} 1/);
  });

  it("charges max_cost for a successful answer without usage, and the cost for an error answer", async () => {
    // A stream without include_usage, and a content type no meter reads: max_cost each.
    answer = sse([{ choices: [{ delta: { content: "a" } }] }]);
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    answer = (res) => {
      res.writeHead(200, { "content-type": "application/x-ndjson" });
      res.end(`${JSON.stringify({ usage: { total_tokens: 5 } })}\n`);
    };
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    // An upstream's refusal without usage costs what admission took.
    answer = (res) => {
      res.writeHead(400, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { message: "bad request" } }));
    };
    await send(gw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    expect(remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 300 - 300 - 1 - 1);
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_usage_unreported_total\{route="chat",reason="no_usage"\} 2/);
  });

  it("charges max_cost to a client that leaves before any usage was reported", async () => {
    answer = (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write(`data: ${JSON.stringify({ choices: [{ delta: { content: "a" } }] })}\n\n`);
      // Never ends, never reports.
    };
    await streamChat(() => true);
    await expect.poll(async () => remainingOf(await remaining("kb"), "p.tenant")).toBe(1000 - 300 - 1);
  });
});

describe("a JSON answer of known length", () => {
  let redis: RedisProcess;
  let redisGw: InProcessGateway;
  beforeAll(async () => {
    redis = await startRedis();
    redisGw = await startGateway(
      config(upstream.url).replace(
        'store: { url: "memory://" }',
        `store: { url: ${redis.url}, timeout: 2s }`,
      ),
    );
  });
  afterAll(async () => {
    await redisGw.stop();
    await redis.stop();
  });

  it("reaches the client's last byte only once its charge is recorded", async () => {
    const body = JSON.stringify({ choices: [{ message: { content: "hi" } }], usage: { total_tokens: 120 } });
    let lastSentAt = 0;
    answer = (res) => {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(body) });
      res.write(body.slice(0, 10));
      // Redis stops taking writes (the charge) for 300 ms just before the body completes.
      void redis.client.call("CLIENT", "PAUSE", "300", "WRITE").then(() => {
        lastSentAt = performance.now();
        res.end(body.slice(10));
      });
    };
    const r = await send(redisGw.url, { path: "/chat", method: "POST", headers: { "x-api-key": "ka" } });
    const completedAt = performance.now();
    expect(JSON.parse(r.body).usage.total_tokens).toBe(120);
    // Held until the charge landed: the client could not see the body whole before it.
    expect(completedAt - lastSentAt).toBeGreaterThan(200);
    answer = (res) => res.end("{}");
    const next = await send(redisGw.url, { path: "/header", headers: { "x-api-key": "kb" } });
    expect(remainingOf(next.headers.ratelimit as string, "p.tenant")).toBe(1000 - 120 - 1);
  });
});
