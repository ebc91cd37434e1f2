// Issue 13, items 1–3: protocol upgrades as an attacker sends them, over raw sockets against the
// built CLI, with the gateway's file descriptors counted from /proc.
// - 13.1: an h2c upgrade (what `curl --http2` sends) to an upstream that switches any protocol
//   was tunnelled, so every later request on the connection skipped every check.
// - 13.2: a refused WebSocket handshake left its socket open for good (CLOSE-WAIT).
// - 13.3: a tunnel its client half-closed never ended, and its renewed lease kept the slot.
import { readdirSync } from "node:fs";
import { createServer, type IncomingMessage, type Server } from "node:http";
import { type AddressInfo, connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";

interface Seen {
  kind: "request" | "upgrade";
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
}

let upstream: Server;
let plainUpstream: Server;
const seen: Seen[] = [];
const upstreamSockets: Socket[] = [];
let gw: GatewayProcess;
const hanging: Socket[] = [];
const hangingEnded: Socket[] = [];

/** An upstream that switches to whatever protocol is asked for and then echoes raw bytes. */
function switchingUpstream(): Server {
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (c) => {
      body += c;
    });
    req.on("end", () => {
      seen.push({ kind: "request", method: req.method!, url: req.url!, headers: req.headers, body });
      res.end(`plain ${req.method} ${req.url}`);
    });
  });
  server.on("upgrade", (req, socket: Socket) => {
    seen.push({ kind: "upgrade", method: req.method!, url: req.url!, headers: req.headers, body: "" });
    upstreamSockets.push(socket);
    socket.on("error", () => {});
    // Never answers: the client has to give up first.
    if (req.url!.includes("/hang")) {
      hanging.push(socket);
      socket.on("end", () => hangingEnded.push(socket));
      return;
    }
    socket.write(
      `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${req.headers["x-switch-to"] ?? req.headers.upgrade}\r\n\r\n`,
    );
    // Echoes, and ignores a FIN (an http server's sockets allow half-open): the tunnel must
    // still end when its client half-closes.
    socket.on("data", (d) => socket.write(d));
    socket.on("error", () => {});
  });
  return server;
}

const listenOn = (server: Server) =>
  new Promise<number>((r) => server.listen(0, "127.0.0.1", () => r((server.address() as AddressInfo).port)));

beforeAll(async () => {
  upstream = switchingUpstream();
  plainUpstream = createServer((_req, res) => res.end("no websocket here"));
  const port = await listenOn(upstream);
  const plainPort = await listenOn(plainUpstream);
  gw = await spawnGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
tunnel_idle_timeout: 1500ms
upstreams: { api: http://127.0.0.1:${port}, plain: http://127.0.0.1:${plainPort} }
clients:
  - { id: alice, key: key-alice, plan: p }
plans:
  p:
    global: { rate: 1/h, burst: 100000 }
    routes:
      closed: { limit: 0 }
      slot: { algorithm: concurrency, max_in_flight: 1, lease: 1s }
routes:
  - { name: closed, match: { path: /closed }, upstream: api }
  - { name: slot, match: { path: /slot }, upstream: api }
  - { name: plain, match: { path: /plain }, upstream: plain }
  - { name: default, match: { path: /open }, upstream: api }
`);
}, 30_000);

afterAll(async () => {
  await gw?.stop();
  for (const s of upstreamSockets) s.destroy();
  for (const server of [upstream, plainUpstream]) {
    server?.closeAllConnections();
    await new Promise((r) => server?.close(r));
  }
});

/** A raw connection to the gateway that collects what comes back and notes FIN and close. */
function rawConnection() {
  const url = new URL(gw.url);
  const socket = connect({ port: Number(url.port), host: url.hostname, allowHalfOpen: true });
  const state = { text: "", ended: false, closed: false };
  socket.on("data", (d: Buffer) => {
    state.text += d.toString("latin1");
  });
  socket.on("end", () => {
    state.ended = true;
  });
  socket.on("close", () => {
    state.closed = true;
  });
  socket.on("error", () => {});
  const waitFor = async (test: () => boolean, ms = 4000) => {
    const until = Date.now() + ms;
    while (!test() && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    return test();
  };
  return { socket, state, waitFor };
}

const wsHandshake = (path: string, key = "key-alice") =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
  `Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nx-api-key: ${key}\r\n\r\n`;

function gatewayFds(): number {
  return readdirSync(`/proc/${gw.child.pid}/fd`).length;
}

/** The gateway's open fds once they are back within 2 of `baseline`, or after `ms`. */
async function fdsSettle(baseline: number, ms: number): Promise<number> {
  let fds = gatewayFds();
  const until = Date.now() + ms;
  while (fds > baseline + 2 && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 100));
    fds = gatewayFds();
  }
  return fds;
}

describe("only WebSocket upgrades are tunnelled (13.1)", () => {
  it("an h2c upgrade is served as plain HTTP/1.1 without Upgrade and HTTP2-Settings", async () => {
    const c = rawConnection();
    const before = seen.length;
    c.socket.write(
      "GET /open/a HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" +
        "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nx-api-key: key-alice\r\n\r\n",
    );
    expect(await c.waitFor(() => c.state.text.includes("plain GET /open/a"))).toBe(true);
    expect(c.state.text).toMatch(/^HTTP\/1\.1 200 /);
    const got = seen.slice(before);
    expect(got.map((s) => s.kind)).toEqual(["request"]);
    expect(got[0]!.headers.upgrade).toBeUndefined();
    expect(got[0]!.headers["http2-settings"]).toBeUndefined();
    expect(got[0]!.headers["tollgate-client"]).toBe("alice");
    // The connection stays HTTP: the next request on it is checked like any other.
    c.state.text = "";
    c.socket.write("GET /closed HTTP/1.1\r\nHost: x\r\nx-api-key: key-alice\r\n\r\n");
    expect(await c.waitFor(() => /\r\n\r\n\{.*\}$/s.test(c.state.text))).toBe(true);
    expect(c.state.text).toMatch(/^HTTP\/1\.1 429 /);
    expect(seen.slice(before).length).toBe(1);
    c.socket.destroy();
  });

  it("an h2c upgrade with a body and a pipelined request: both served, both checked", async () => {
    const c = rawConnection();
    const before = seen.length;
    c.socket.write(
      "POST /open/upload HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" +
        "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nx-api-key: key-alice\r\nContent-Length: 11\r\n\r\n" +
        "hello world" +
        "GET /closed HTTP/1.1\r\nHost: x\r\nx-api-key: key-alice\r\n\r\n",
    );
    expect(await c.waitFor(() => (c.state.text.match(/HTTP\/1\.1 /g) ?? []).length === 2)).toBe(true);
    expect(c.state.text).toMatch(/^HTTP\/1\.1 200 /);
    expect(c.state.text).toContain("HTTP/1.1 429 ");
    const got = seen.slice(before);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ kind: "request", method: "POST", body: "hello world" });
    c.socket.destroy();
  });

  it("a WebSocket handshake is tunnelled; one whose upstream switches to another protocol is a 502", async () => {
    const c = rawConnection();
    c.socket.write(wsHandshake("/open/ws"));
    expect(await c.waitFor(() => c.state.text.includes("\r\n\r\n"))).toBe(true);
    expect(c.state.text).toMatch(/^HTTP\/1\.1 101 /);
    expect(c.state.text.toLowerCase()).toContain("upgrade: websocket");
    c.socket.destroy();
    const other = rawConnection();
    other.socket.write(wsHandshake("/open/ws").replace("\r\n\r\n", "\r\nx-switch-to: h2c\r\n\r\n"));
    expect(await other.waitFor(() => other.state.ended)).toBe(true);
    expect(other.state.text).toMatch(/^HTTP\/1\.1 502 /);
    expect(other.state.text).toContain("other than websocket");
    other.socket.destroy();
  });
});

describe("refused handshakes close their socket (13.2)", () => {
  it("401, 404, 429 and an upstream's non-101: the gateway closes each, and its fds come back", async () => {
    const baseline = gatewayFds();
    const conns = [];
    const cases = [
      wsHandshake("/open/x", "no-such-key"), // 401
      wsHandshake("/nowhere"), // 404
      wsHandshake("/closed"), // 429
      wsHandshake("/plain/x"), // the upstream answers 200
    ];
    for (let i = 0; i < 60; i++) {
      const c = rawConnection();
      c.socket.write(cases[i % cases.length]!);
      conns.push(c);
    }
    // The clients never close their side: the gateway must.
    for (const c of conns) expect(await c.waitFor(() => c.state.ended)).toBe(true);
    expect(conns.map((c) => Number(c.state.text.slice(9, 12))).slice(0, 4)).toEqual([401, 404, 429, 200]);
    // After the linger the gateway has forgotten them even though the clients never closed.
    expect(await fdsSettle(baseline, 5000)).toBeLessThanOrEqual(baseline + 2);
    for (const c of conns) c.socket.destroy();
  });
});

describe("a client that abandons its handshake", () => {
  it("is noticed while the upstream has not answered: its slot comes back and its sockets close", async () => {
    const baseline = gatewayFds();
    const gone = rawConnection();
    gone.socket.write(wsHandshake("/slot/hang"));
    await new Promise((r) => setTimeout(r, 300));
    gone.socket.end(); // FIN, as a browser tab that closes does
    await gone.waitFor(() => gone.state.closed || gone.state.ended, 3000);
    // The gateway closes its side toward the upstream too, and the concurrency slot is free.
    const until = Date.now() + 3000;
    while (hangingEnded.length < hanging.length && Date.now() < until)
      await new Promise((r) => setTimeout(r, 50));
    expect(hanging).toHaveLength(1);
    expect(hangingEnded).toHaveLength(1);
    const next = rawConnection();
    next.socket.write(wsHandshake("/slot"));
    expect(await next.waitFor(() => next.state.text.length > 12)).toBe(true);
    expect(next.state.text).toMatch(/^HTTP\/1\.1 101 /);
    // A reset, not a FIN: the slot comes back at once, not after the half-close linger.
    next.socket.resetAndDestroy();
    gone.socket.destroy();
    expect(await fdsSettle(baseline, 3000)).toBeLessThanOrEqual(baseline + 2);
  });
});

describe("CONNECT", () => {
  it("is a 405 problem, not a silent close", async () => {
    const c = rawConnection();
    c.socket.write("CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n");
    expect(await c.waitFor(() => c.state.ended)).toBe(true);
    expect(c.state.text).toMatch(/^HTTP\/1\.1 405 /);
    expect(c.state.text).toContain("application/problem+json");
    c.socket.destroy();
  });
});

describe("tunnels end (13.3)", () => {
  it("a client's FIN ends the tunnel and gives its concurrency slot back", async () => {
    const a = rawConnection();
    a.socket.write(wsHandshake("/slot"));
    expect(await a.waitFor(() => a.state.text.startsWith("HTTP/1.1 101"))).toBe(true);
    const refused = rawConnection();
    refused.socket.write(wsHandshake("/slot"));
    expect(await refused.waitFor(() => refused.state.text.length > 12)).toBe(true);
    expect(refused.state.text).toMatch(/^HTTP\/1\.1 429 /);
    // Half-close: FIN, and keep reading. The upstream ignores the FIN.
    a.socket.end();
    expect(await a.waitFor(() => a.state.closed || a.state.ended, 5000)).toBe(true);
    // The slot is back (the lease of 1 s would otherwise be renewed for ever).
    await new Promise((r) => setTimeout(r, 200));
    const b = rawConnection();
    b.socket.write(wsHandshake("/slot"));
    expect(await b.waitFor(() => b.state.text.length > 12)).toBe(true);
    expect(b.state.text).toMatch(/^HTTP\/1\.1 101 /);
    b.socket.destroy();
    refused.socket.destroy();
  });

  it("a tunnel idle for tunnel_idle_timeout is closed", async () => {
    const c = rawConnection();
    c.socket.write(wsHandshake("/open/idle"));
    expect(await c.waitFor(() => c.state.text.startsWith("HTTP/1.1 101"))).toBe(true);
    // Traffic keeps it open past the timeout…
    for (let i = 0; i < 4; i++) {
      await new Promise((r) => setTimeout(r, 500));
      c.socket.write("ping");
    }
    expect(c.state.closed || c.state.ended).toBe(false);
    expect(c.state.text).toContain("pingping");
    // …silence closes it.
    const started = Date.now();
    expect(await c.waitFor(() => c.state.ended || c.state.closed, 4000)).toBe(true);
    expect(Date.now() - started).toBeGreaterThan(1000);
    c.socket.destroy();
  });
});

describe("a handshake reset by its client before the answer", () => {
  it("costs that connection only: the process stays up, its fds come back, the next request is served", async () => {
    const baseline = gatewayFds();
    // Node removes its own socket error handler from a socket it hands to an 'upgrade' or
    // 'connect' listener: a reset (RST) on one with no listener of ours was an uncaught error,
    // and the whole gateway exited.
    const cases = [
      wsHandshake("/open/x", "no-such-key"), // on its way to a 401
      wsHandshake("/open/hang"), // admitted, the upstream never answers
      wsHandshake("/open/x"), // admitted and tunnelled
      "GET /open/x HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", // no key
      "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
    ];
    for (let round = 0; round < 4; round++) {
      const resets = cases.map((bytes, i) => {
        const c = rawConnection();
        c.socket.write(bytes);
        return new Promise<void>((r) =>
          setTimeout(
            () => {
              c.socket.resetAndDestroy();
              r();
            },
            (round + i) % 3,
          ),
        );
      });
      await Promise.all(resets);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(gw.child.exitCode).toBeNull();
    expect(await fdsSettle(baseline, 5000)).toBeLessThanOrEqual(baseline + 2);
    const next = rawConnection();
    next.socket.write(
      "GET /open/after HTTP/1.1\r\nHost: x\r\nx-api-key: key-alice\r\nConnection: close\r\n\r\n",
    );
    expect(await next.waitFor(() => next.state.ended)).toBe(true);
    expect(next.state.text).toMatch(/^HTTP\/1\.1 200 /);
  });
});
