// WebSockets through the CLI: the handshake is routed and limited like any request (a 429
// problem before the upgrade), a concurrency limit holds its slot for the life of the socket,
// messages flow both ways, and either side closing closes the other.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";

let upstream: Server;
let wss: WebSocketServer;
let gw: GatewayProcess;
const serverSockets: WebSocket[] = [];

beforeAll(async () => {
  upstream = createServer((_req, res) => res.end("plain http"));
  wss = new WebSocketServer({ server: upstream });
  wss.on("connection", (socket, req) => {
    serverSockets.push(socket);
    socket.send(`hello ${req.headers["tollgate-client"] ?? "anonymous"}`);
    socket.on("message", (data) => socket.send(`echo:${data}`));
  });
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const port = (upstream.address() as AddressInfo).port;
  gw = await spawnGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
shutdown_grace: 1s
upstreams: { api: http://127.0.0.1:${port} }
clients:
  - { id: chatty, key: key-chatty, plan: p }
  - { id: slotted, key: key-slotted, plan: p }
plans:
  p:
    global: { rate: 1/h, burst: 10 }
    routes:
      live: { algorithm: concurrency, max_in_flight: 2, lease: 1m }
      short: { algorithm: concurrency, max_in_flight: 1, lease: 1s }
routes:
  - { name: live, match: { path: /live }, upstream: api }
  - { name: short, match: { path: /short }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
`);
}, 30_000);
afterAll(async () => {
  await gw?.stop();
  wss?.close();
  upstream?.closeAllConnections();
  await new Promise((r) => upstream?.close(r));
});

function open(path: string, key: string): Promise<{ ws: WebSocket; first: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(gw.url.replace("http", "ws") + path, { headers: { "x-api-key": key } });
    ws.once("message", (data) => resolve({ ws, first: String(data) }));
    ws.once("unexpected-response", (_req, res) => {
      let body = "";
      res.on("data", (c) => {
        body += c;
      });
      res.on("end", () =>
        reject(
          Object.assign(new Error(`status ${res.statusCode}`), {
            status: res.statusCode,
            body,
            headers: res.headers,
          }),
        ),
      );
    });
    ws.once("error", reject);
  });
}

const nextMessage = (ws: WebSocket) => new Promise<string>((r) => ws.once("message", (d) => r(String(d))));
const closed = (ws: WebSocket) =>
  new Promise<void>((r) => (ws.readyState === WebSocket.CLOSED ? r() : ws.once("close", () => r())));

describe("WebSockets through tollgate", () => {
  it("echoes both ways, with the caller identified upstream", async () => {
    const { ws, first } = await open("/chat", "key-chatty");
    expect(first).toBe("hello chatty");
    ws.send("ping");
    expect(await nextMessage(ws)).toBe("echo:ping");
    ws.close();
    await closed(ws);
  });

  it("the 11th handshake of a caller with burst 10 gets a 429 problem before any upgrade", async () => {
    const sockets = [];
    for (let i = 0; i < 9; i++) sockets.push((await open("/chat", "key-chatty")).ws); // 1 used above
    const refused = await open("/chat", "key-chatty").catch((err) => err);
    expect(refused.status).toBe(429);
    expect(refused.headers["content-type"]).toBe("application/problem+json");
    expect(JSON.parse(refused.body)).toMatchObject({ status: 429, "violated-policies": ["p.global"] });
    for (const ws of sockets) ws.close();
    await Promise.all(sockets.map(closed));
  });

  it("a concurrency limit of 2 refuses a 3rd open socket and admits it once one closes", async () => {
    const a = await open("/live", "key-slotted");
    const b = await open("/live", "key-slotted");
    const third = await open("/live", "key-slotted").catch((err) => err);
    expect(third.status).toBe(429);
    expect(JSON.parse(third.body)["violated-policies"]).toEqual(["p.live"]);
    a.ws.close();
    await closed(a.ws);
    await new Promise((r) => setTimeout(r, 100));
    const c = await open("/live", "key-slotted");
    expect(c.first).toBe("hello slotted");
    b.ws.close();
    c.ws.close();
    await Promise.all([closed(b.ws), closed(c.ws)]);
  });

  it("a socket that outlives its 1 s lease keeps its slot: the gateway renews it", async () => {
    const held = await open("/short", "key-slotted");
    await new Promise((r) => setTimeout(r, 2500));
    const refused = await open("/short", "key-slotted").catch((err) => err);
    expect(refused.status).toBe(429);
    held.ws.close();
    await closed(held.ws);
    await new Promise((r) => setTimeout(r, 100));
    const next = await open("/short", "key-slotted");
    next.ws.close();
    await closed(next.ws);
  });

  it("the upstream closing closes the client side", async () => {
    const { ws } = await open("/chat2", "key-slotted");
    const serverSide = serverSockets.at(-1)!;
    serverSide.terminate();
    await closed(ws);
    expect(ws.readyState).toBe(WebSocket.CLOSED);
  });

  it("a shutdown closes open tunnels once shutdown_grace (1 s) has run out, then exits", async () => {
    const { ws } = await open("/chat3", "key-slotted");
    const started = performance.now();
    gw.child.kill("SIGTERM");
    await closed(ws);
    const tookMs = performance.now() - started;
    expect(tookMs).toBeGreaterThan(900);
    expect(tookMs).toBeLessThan(3000);
    expect(await gw.exited).toBe(0);
  });
});
