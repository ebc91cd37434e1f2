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
clients:
  - { id: body-client, key: body-key, plan: team, tenant: bodies }
  - { id: flooder, key: flood-key, plan: team, tenant: flood }
  - { id: bystander, key: bystander-key, plan: team, tenant: bystander }
  - { id: hasty, key: hasty-key, plan: slow, tenant: hasty }
plans:
  team:
    tenant: { algorithm: fixed_window, limit: 100000000, window: 1 month, unit: tokens }
  slow:
    global: { rate: 1/h, burst: 1 }
routes:
  - { name: big, match: { path: /big }, upstream: llm, max_body: 4mb, ai: { format: openai, max_output: 500 } }
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
    const body =
      '{ "model" : "m",\n  "seed": 12345678901234567890, "max_completion_tokens": 100,\n  "messages": [] }';
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
        max_completion_tokens: 50,
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
    expect(bad.json<{ error: { message: string } }>().error.message).toMatch(/gives "model" more than once/);
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

describe("what one caller can make the gateway hold (found by an attack)", () => {
  const big = (key: string, body: string) =>
    send(gw.url, {
      method: "POST",
      path: "/big/chat/completions",
      headers: { "x-api-key": key, "content-type": "application/json" },
      body,
      timeoutMs: 20_000,
    });

  it("a body of a million values is refused before it is parsed", async () => {
    const values = `{"model":"m","x":[${"{},".repeat(1_000_000)}{}]}`;
    const started = performance.now();
    const reply = await big("body-key", values);
    expect(reply.status).toBe(400);
    expect(reply.json<{ error: { message: string } }>().error.message).toMatch(/more than 500000 values/);
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it("bodies held at once past one caller's share are refused, and another caller is served meanwhile", async () => {
    const url = new URL(gw.url);
    const chunk = Buffer.alloc(3_900_000, 0x61);
    // Twenty uploads of 4 MB that stop short of their end: the gateway holds what came.
    const held = await Promise.all(
      Array.from(
        { length: 20 },
        () =>
          new Promise<{ socket: ReturnType<typeof connect>; answer: Promise<string> }>((resolve) => {
            const socket = connect(Number(url.port), url.hostname);
            let got = "";
            const answer = new Promise<string>((done) => {
              socket.on("data", (c: Buffer) => {
                got += c.toString();
                done(got);
              });
              socket.on("close", () => done(got));
            });
            socket.on("error", () => {});
            socket.write(
              `POST /big/chat/completions HTTP/1.1\r\nHost: x\r\nx-api-key: flood-key\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n{"m":"`,
            );
            socket.write(chunk, () => resolve({ socket, answer }));
          }),
      ),
    );
    await new Promise((r) => setTimeout(r, 300));
    const other = await send(gw.url, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "x-api-key": "bystander-key", "content-type": "application/json" },
      body: '{"model":"m","max_completion_tokens":5}',
    });
    expect(other.status).toBe(200);
    // 64 MiB counted at two per byte: eight such uploads are held, the rest refused.
    const answered = await Promise.all(
      held.map((h) => Promise.race([h.answer, new Promise<string>((r) => setTimeout(() => r(""), 200))])),
    );
    const refused = answered.filter((a) => a.startsWith("HTTP/1.1 429"));
    expect(refused.length).toBeGreaterThanOrEqual(10);
    expect(refused[0]).toMatch(/request bodies being read at once pass its share .*at most 64 MiB/);
    for (const h of held) h.socket.destroy();
    await new Promise((r) => setTimeout(r, 200));
    expect(gw.gateway.requestsInFlight).toBe(0);
    // What was held is given back: the same caller is served again.
    const again = await big("flood-key", '{"model":"m","max_completion_tokens":5}');
    expect(again.status).toBe(200);
  });

  it("a caller this instance already refuses is refused before its body is read", async () => {
    const ok = await send(gw.url, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "x-api-key": "hasty-key", "content-type": "application/json" },
      body: '{"model":"m","max_completion_tokens":5}',
    });
    expect(ok.status).toBe(200);
    // Refused once by the store: the deny cache knows it now.
    expect(
      (
        await send(gw.url, {
          method: "POST",
          path: "/v1/chat/completions",
          headers: { "x-api-key": "hasty-key", "content-type": "application/json" },
          body: "{}",
        })
      ).status,
    ).toBe(429);
    // Asked to send its body (Expect: 100-continue), it is answered 429 without being invited.
    const url = new URL(gw.url);
    const text = await new Promise<string>((resolve) => {
      const socket = connect(Number(url.port), url.hostname);
      let got = "";
      socket.on("data", (c: Buffer) => {
        got += c.toString();
      });
      socket.on("close", () => resolve(got));
      socket.write(
        "POST /big/chat/completions HTTP/1.1\r\nHost: x\r\nx-api-key: hasty-key\r\nContent-Type: application/json\r\nExpect: 100-continue\r\nContent-Length: 1000000\r\n\r\n",
      );
      setTimeout(() => socket.destroy(), 2000);
    });
    expect(text).toMatch(/^HTTP\/1\.1 429/);
    expect(text).not.toContain("100 Continue");
  });

  it("no WebSocket, and no body on a GET, passes an AI route unmetered", async () => {
    const ws = await rawRequest(
      gw.url,
      "GET /v1/realtime?model=m HTTP/1.1\r\nHost: x\r\nx-api-key: body-key\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    expect(ws.status).toBe(404);
    const before = provider.requests.length;
    const body = '{"model":"m","messages":[]}';
    const get = await rawRequest(
      gw.url,
      `GET /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-api-key: body-key\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    expect(get.status).toBe(400);
    const latin = await send(gw.url, {
      method: "POST",
      path: "/v1/chat/completions",
      headers: { "x-api-key": "body-key", "content-type": "application/json; charset=latin1" },
      body: "{}",
    });
    expect(latin.status).toBe(415);
    expect(provider.requests.length).toBe(before);
  });
});
