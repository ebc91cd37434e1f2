// An AI route reads its request body before any limit (issue 29): the framings clients send
// keep working (chunked, Expect: 100-continue, HTTP/2 with and without Content-Length), the
// upstream gets the client's bytes unless the reservation changed them, and what cannot be read
// is refused with a reason and never forwarded: too large (413, declared or counted), not JSON
// or compressed (415), not a body every upstream reads alike (400). A client that leaves while
// it sends its body costs nothing and leaks nothing.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type FakeProvider, startFakeProvider } from "../support/ai-provider.js";
import { makeCertificate, type TestCertificate } from "../support/certs.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { h2Connect, h2Request } from "../support/h2.js";
import { send } from "../support/http.js";
import { rawRequest } from "../support/raw.js";
import { type RedisProcess, startRedis } from "../support/redis.js";

const config = (redisUrl: string, providerUrl: string, tls?: TestCertificate) => `
listen: ${tls ? `{ address: 127.0.0.1:0, tls: { cert_file: ${tls.certFile}, key_file: ${tls.keyFile} } }` : "127.0.0.1:0"}
admin: { listen: "127.0.0.1:0" }
log: { level: warn, requests: false }
store: { url: "${redisUrl}", on_failure: closed }
upstreams: { llm: "${providerUrl}" }
clients: [{ id: body-client, key: body-key, plan: team, tenant: bodies }]
plans:
  team:
    tenant: { algorithm: fixed_window, limit: 100000000, window: 1 month, unit: tokens }
routes:
  - { name: chat, match: { path: /v1 }, upstream: llm, max_body: 64kb, ai: { format: openai, max_output: 500 } }
`;

let redis: RedisProcess;
let provider: FakeProvider;
let gw: InProcessGateway;
let tlsGw: InProcessGateway;

beforeAll(async () => {
  redis = await startRedis();
  provider = await startFakeProvider();
  gw = await startGateway(config(redis.url, provider.url));
  tlsGw = await startGateway(config(redis.url, provider.url, makeCertificate()));
});

afterAll(async () => {
  await gw?.stop();
  await tlsGw?.stop();
  await provider?.close();
  await redis?.stop();
});

const HEAD = "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-api-key: body-key\r\nConnection: close\r\n";

describe("what reaches the upstream", () => {
  it("the client's bytes exactly, when the reservation changes nothing", async () => {
    const body = '{ "model" : "m",\n  "seed": 12345678901234567890, "max_tokens": 100,\n  "messages": [] }';
    const reply = await send(gw.url, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "x-api-key": "body-key", "content-type": "application/json; charset=utf-8" },
      body,
    });
    expect(reply.status).toBe(200);
    expect(provider.requests.at(-1)!.raw).toBe(body);
  });

  it("a chunked upload, and an Expect: 100-continue one invited once admitted", async () => {
    const body = '{"model":"m","messages":[{"role":"user","content":"chunked"}]}';
    const chunked = await rawRequest(
      gw.url,
      `${HEAD}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );
    expect(chunked.status).toBe(200);
    // The ceiling written in, the rest as sent; the upstream's Content-Length the new one.
    const sent = provider.requests.at(-1)!;
    expect(sent.raw).toBe(`${body.slice(0, -1)},"max_completion_tokens":500}`);
    expect(sent.headers["content-length"]).toBe(String(Buffer.byteLength(sent.raw)));
    expect(sent.headers["transfer-encoding"]).toBeUndefined();

    const url = new URL(gw.url);
    const text = await new Promise<string>((resolve) => {
      const socket = connect(Number(url.port), url.hostname);
      let got = "";
      socket.on("data", (c: Buffer) => {
        got += c.toString();
        if (got.startsWith("HTTP/1.1 100")) {
          got = "";
          socket.write(body);
        }
      });
      socket.on("close", () => resolve(got));
      socket.write(
        `${HEAD}Content-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
    });
    expect(text).toMatch(/^HTTP\/1\.1 200/);
  });

  it("over HTTP/2, with and without Content-Length", async () => {
    const session = h2Connect(tlsGw.url.replace("http:", "https:"));
    try {
      const body = JSON.stringify({
        model: "m",
        max_tokens: 50,
        messages: [{ role: "user", content: "h2" }],
      });
      const framings: Record<string, string>[] = [
        { "content-length": String(body.length) },
        {}, // a body of unknown length: its stream ends it
      ];
      for (const headers of framings) {
        const reply = await h2Request(session, "/v1/chat/completions", {
          method: "POST",
          headers: { "x-api-key": "body-key", "content-type": "application/json", ...headers },
          body,
        });
        expect(reply.status).toBe(200);
        expect(provider.requests.at(-1)!.raw).toBe(body);
      }
      const tooBig = await h2Request(session, "/v1/chat/completions", {
        method: "POST",
        headers: { "x-api-key": "body-key", "content-type": "application/json" },
        body: JSON.stringify({ messages: "x".repeat(70_000) }),
      });
      expect(tooBig.status).toBe(413);
    } finally {
      session.close();
    }
  });
});

describe("what is refused, and never forwarded", () => {
  const post = (body: string | Buffer, headers: Record<string, string> = {}) =>
    send(gw.url, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "x-api-key": "body-key", "content-type": "application/json", ...headers },
      body,
    });

  it("413 past max_body, declared or counted; 415 not JSON or compressed; 400 naming what is wrong", async () => {
    const before = provider.requests.length;
    expect((await post(JSON.stringify({ messages: "x".repeat(70_000) }))).status).toBe(413);
    const counted = await rawRequest(
      gw.url,
      `${HEAD}Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n${(70_000).toString(16)}\r\n${"x".repeat(70_000)}\r\n0\r\n\r\n`,
    );
    expect(counted.status).toBe(413);
    expect((await post("{}", { "content-type": "text/plain" })).status).toBe(415);
    expect((await post("{}", { "content-encoding": "gzip" })).status).toBe(415);
    const bad = await post('{"model":"a","model":"b"}');
    expect(bad.status).toBe(400);
    expect(bad.json().detail).toMatch(/gives "model" more than once/);
    expect((await post("not json")).status).toBe(400);
    expect((await post(Buffer.from([0x7b, 0xc3, 0x28, 0x7d]))).status).toBe(400);
    expect(provider.requests.length).toBe(before);
  });

  it("a client that leaves in the middle of its body is never forwarded, and leaves no socket open", async () => {
    const before = provider.requests.length;
    const url = new URL(gw.url);
    for (let i = 0; i < 20; i++) {
      await new Promise<void>((resolve) => {
        const socket = connect(Number(url.port), url.hostname);
        socket.on("error", () => {});
        socket.write(`${HEAD}Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model":"m",`);
        setTimeout(() => {
          socket.destroy();
          resolve();
        }, 20);
      });
    }
    await new Promise((r) => setTimeout(r, 100));
    expect(provider.requests.length).toBe(before);
    // The gateway still answers, and has nothing left in flight.
    expect((await post('{"model":"m","max_tokens":5}')).status).toBe(200);
    expect(gw.gateway.requestsInFlight).toBe(0);
  });
});
