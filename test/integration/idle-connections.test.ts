// How long a client connection with nothing in flight is kept: `idle_timeout`, alike for an
// HTTP/1.1 keep-alive connection and an HTTP/2 session with no stream open, which ends with a
// GOAWAY. A new user's first Node http2 client reused its session after 5 s of quiet and crashed
// on the closed session; idle connections now live as long as nginx's keepalive_timeout (75 s),
// longer than the 60 s a cloud load balancer keeps its own.
import { writeFileSync } from "node:fs";
import { type ClientHttp2Session, constants } from "node:http2";
import { Agent, request } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeCertificate, type TestCertificate } from "../support/certs.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { h2Connect, h2Request } from "../support/h2.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let upstream: TestUpstream;
let cert: TestCertificate;
const FREE = { "x-api-key": "key-free" };

const config = (idle?: string) => `
listen:
  address: 127.0.0.1:0
  tls: { cert_file: ${cert.certFile}, key_file: ${cert.keyFile} }
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
${idle ? `idle_timeout: ${idle}` : ""}
upstreams: { api: ${upstream.url} }
clients:
  - { id: free, key: key-free, plan: open }
plans:
  open: { global: { rate: 1000/s, burst: 1000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** When `session` is told to go away (its error code) or closed, from now. */
function ending(session: ClientHttp2Session): Promise<{ after: number; goaway?: number }> {
  const started = performance.now();
  return new Promise((resolve) => {
    let goaway: number | undefined;
    session.once("goaway", (code: number) => {
      goaway = code;
    });
    session.once("close", () => resolve({ after: performance.now() - started, goaway }));
  });
}

beforeAll(async () => {
  upstream = await startUpstream();
  cert = makeCertificate();
});
afterAll(async () => {
  await upstream.close();
});

describe("by default", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config());
  });
  afterAll(async () => {
    await gw.stop();
  });

  // Both quiet at once, so the suite waits the 6 s once.
  it("an HTTP/2 session and an HTTP/1.1 keep-alive connection quiet for longer than 5 s serve their next request", async () => {
    const url = `https://127.0.0.1:${gw.gateway.proxyAddress!.port}`;
    const session = h2Connect(url);
    const agent = new Agent({ keepAliveTimeout: 60_000, connect: { rejectUnauthorized: false } });
    const connects: number[] = [];
    agent.on("connect", () => connects.push(1));
    try {
      expect((await h2Request(session, "/first", { headers: FREE })).status).toBe(200);
      const first = await request(`${url}/a`, { dispatcher: agent, headers: FREE });
      await first.body.text();
      await sleep(6000);
      expect(session.closed || session.destroyed).toBe(false);
      expect((await h2Request(session, "/second", { headers: FREE })).status).toBe(200);
      const second = await request(`${url}/b`, { dispatcher: agent, headers: FREE });
      await second.body.text();
      expect(second.statusCode).toBe(200);
      expect(connects).toHaveLength(1);
    } finally {
      session.close();
      await agent.close();
    }
  }, 15_000);
});

describe("idle_timeout", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config("1s"));
  });
  afterAll(async () => {
    await gw.stop();
  });

  it("closes a quiet HTTP/2 session with a graceful GOAWAY once it passes", async () => {
    const session = h2Connect(`https://127.0.0.1:${gw.gateway.proxyAddress!.port}`);
    expect((await h2Request(session, "/first", { headers: FREE })).status).toBe(200);
    const ended = await ending(session);
    expect(ended.goaway).toBe(constants.NGHTTP2_NO_ERROR);
    expect(ended.after).toBeGreaterThan(800);
    expect(ended.after).toBeLessThan(4000);
  });

  it("is changed by a reload for the connections opened after it", async () => {
    writeFileSync(gw.configFile, config("3s"));
    const result = await gw.gateway.reload("admin");
    expect(result.ok).toBe(true);
    const session = h2Connect(`https://127.0.0.1:${gw.gateway.proxyAddress!.port}`);
    expect((await h2Request(session, "/first", { headers: FREE })).status).toBe(200);
    const ended = await ending(session);
    expect(ended.goaway).toBe(constants.NGHTTP2_NO_ERROR);
    expect(ended.after).toBeGreaterThan(2500);
  }, 10_000);
});
