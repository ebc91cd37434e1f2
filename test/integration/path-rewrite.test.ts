// Issue 16: strip_prefix and rewrite, seen at a real upstream: the normalised path with the
// route's prefix dropped or replaced, under the upstream URL's own path, the query string as the
// client sent it, the same for a WebSocket handshake; the route and its limits keyed on the
// client's path. The gateway runs in-process against a real upstream.
import type { IncomingMessage } from "node:http";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let upstream: TestUpstream;
let gw: InProcessGateway;
/** Handshakes the upstream received, by request target. */
const upgrades: string[] = [];
const upstreamSockets: Socket[] = [];

beforeAll(async () => {
  upstream = await startUpstream();
  upstream.server.on("upgrade", (req: IncomingMessage, socket: Socket) => {
    upgrades.push(req.url!);
    upstreamSockets.push(socket);
    socket.on("error", () => {});
    socket.end("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
  });
  // A route limit per third segment of the path: a budget per item of the client's path.
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
store: { url: "memory://" }
upstreams:
  api: ${upstream.url}/base
routes:
  - name: billing
    match: { path: /v1/billing }
    upstream: api
    rewrite: { prefix: /billing }
    limits:
      item: { limit: 1, window: 1m, by: "segment:3" }
  - { name: files, match: { path: /files }, upstream: api, strip_prefix: true }
  - { name: plain, match: { path: /plain }, upstream: api }
headers: [ietf]
`);
});

afterAll(async () => {
  await gw?.stop();
  for (const s of upstreamSockets) s.destroy();
  await upstream?.close();
});

/** What the upstream received for one request through the gateway. */
async function sentAs(path: string): Promise<string> {
  const before = upstream.received.length;
  const r = await send(gw.url, { path });
  expect(r.status).toBe(200);
  expect(upstream.received).toHaveLength(before + 1);
  return upstream.received.at(-1)!.url;
}

describe("strip_prefix and rewrite at the upstream", () => {
  it.each([
    ["/v1/billing/Invoices/7?Sort=Desc&q=a%20b&q=c", "/base/billing/Invoices/7?Sort=Desc&q=a%20b&q=c"],
    ["/V1/Billing/X/..//Report;v=1?x", "/base/billing/Report?x"],
    // No third segment: the item limit falls back to the caller's budget, used here once.
    ["/v1/billing", "/base/billing"],
    ["/files/docs/?page=2", "/base/docs/?page=2"],
    ["/files/a/B.txt?download=1", "/base/a/B.txt?download=1"],
    ["/FILES", "/base/"],
    ["/plain/x?y=1", "/base/plain/x?y=1"],
  ])("%s is sent as %s", async (path, upstreamUrl) => {
    expect(await sentAs(path)).toBe(upstreamUrl);
  });

  it("keeps the route and its limits keyed on the client's path", async () => {
    // segment:3 counts the client's /v1/billing/<item>/…, not the upstream's /billing/<item>/…,
    // whose third segment is what follows the item: keyed on that, /a/same and /b/same would
    // share a budget and /a/other would have its own.
    const a = await send(gw.url, { path: "/v1/billing/a/same" });
    const b = await send(gw.url, { path: "/v1/billing/b/same" });
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.headers["ratelimit-policy"]).toBe('"billing.item";q=1;w=60');
    const againA = await send(gw.url, { path: "/v1/billing/a/other" });
    expect(againA.status).toBe(429);
    expect(againA.json()).toMatchObject({ "violated-policies": ["billing.item"] });
    expect(upstream.received.map((r) => r.url)).not.toContain("/base/billing/a/other");
  });

  it("sends a WebSocket handshake to the rewritten path, with its query", async () => {
    const url = new URL(gw.url);
    const socket = connect({ port: Number(url.port), host: url.hostname });
    socket.on("error", () => {});
    let text = "";
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
    });
    socket.write(
      "GET /v1/billing/live?topic=Invoices HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
    );
    const until = Date.now() + 3000;
    while (!text.includes("\r\n\r\n") && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    socket.destroy();
    expect(text).toMatch(/^HTTP\/1\.1 101 /);
    expect(upgrades).toEqual(["/base/billing/live?topic=Invoices"]);
  });
});
