// Issue 16: a route's `timeout` is a deadline for the whole upstream response. undici's own
// timeouts are idle timeouts, so an upstream that trickles a byte every 300 ms never timed out.
// The gateway runs in-process against a raw TCP upstream that trickles on demand; the process's
// file descriptors are counted from /proc, as the upgrade-attack tests count the CLI's.
import { readdirSync } from "node:fs";
import { request } from "node:http";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";

const TRICKLE_MS = 300;

let upstream: Server;
const upstreamSockets = new Set<Socket>();
/** Request targets the upstream received. */
const seen: string[] = [];
let gw: InProcessGateway;

/**
 * Answers by the last segment of the path, one byte every TRICKLE_MS, then closes:
 * - `head`: a status line and a header that never ends (no head ever reaches the gateway);
 * - `body?bytes=N`: a whole head with Content-Length N, then the N bytes.
 */
function tricklingUpstream(): Server {
  return createServer((socket) => {
    upstreamSockets.add(socket);
    socket.on("close", () => upstreamSockets.delete(socket));
    socket.on("error", () => {});
    let head = "";
    const onData = (d: Buffer) => {
      head += d.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      socket.off("data", onData);
      const path = head.slice(head.indexOf(" ") + 1, head.indexOf(" HTTP/"));
      seen.push(path);
      if (/\r\nupgrade: websocket\r\n/i.test(head)) {
        // A handshake under /ws/hang is never answered; any other is switched and echoed.
        if (path.startsWith("/ws/hang")) return;
        socket.write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
        socket.on("data", (d) => socket.write(d));
        return;
      }
      const target = new URL(path, "http://x");
      const bytes = Number(target.searchParams.get("bytes") ?? 0);
      const slowHead = target.pathname.endsWith("/head");
      socket.write(
        slowHead
          ? "HTTP/1.1 200 OK\r\nX-Slow: "
          : `HTTP/1.1 200 OK\r\nContent-Length: ${bytes}\r\nConnection: close\r\n\r\n`,
      );
      const rest = slowHead ? "a".repeat(1000) : "x".repeat(bytes);
      let i = 0;
      const timer = setInterval(() => {
        if (i >= rest.length || socket.destroyed) {
          clearInterval(timer);
          socket.end();
          return;
        }
        socket.write(rest[i++]!);
      }, TRICKLE_MS);
      socket.on("close", () => clearInterval(timer));
    };
    socket.on("data", onData);
  });
}

beforeAll(async () => {
  upstream = tricklingUpstream();
  await new Promise<void>((r) => upstream.listen(0, "127.0.0.1", r));
  const port = (upstream.address() as AddressInfo).port;
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: true }
store: { url: "memory://" }
upstreams:
  api: { url: http://127.0.0.1:${port}, timeout: 10s }
  # One connection: a request waits for it while another holds it.
  single: { url: http://127.0.0.1:${port}, timeout: 10s, connections: 1 }
routes:
  - { name: quick, match: { path: /quick }, upstream: api, timeout: 1s }
  - { name: patient, match: { path: /patient }, upstream: api }
  - { name: queued, match: { path: /queued }, upstream: single, timeout: 1s }
  - { name: holder, match: { path: /holder }, upstream: single }
  - { name: hasty, match: { path: /hasty }, upstream: single, connect_timeout: 300ms }
  - { name: ws, match: { path: /ws }, upstream: api, timeout: 1s }
`);
});

afterAll(async () => {
  await gw?.stop();
  for (const s of upstreamSockets) s.destroy();
  await new Promise((r) => upstream?.close(r));
});

/** A GET whose response is read as it comes: status, body bytes, whether it ended or was cut. */
function fetchBody(path: string): Promise<{ status: number; body: string; complete: boolean; ms: number }> {
  const url = new URL(gw.url);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request({ host: url.hostname, port: url.port, path, agent: false }, (res) => {
      let body = "";
      res.on("data", (d: Buffer) => {
        body += d.toString("latin1");
      });
      const done = (complete: boolean) =>
        resolve({ status: res.statusCode ?? 0, body, complete, ms: performance.now() - started });
      res.on("end", () => done(res.complete));
      res.on("error", () => done(false));
      res.on("aborted", () => done(false));
    });
    req.on("error", reject);
    req.end();
  });
}

/** A WebSocket handshake over a raw socket: `answer` is the response head once it is in. */
function rawHandshake(path: string) {
  const url = new URL(gw.url);
  const started = performance.now();
  let ended = 0;
  const socket = connect({ port: Number(url.port), host: url.hostname });
  socket.on("error", () => {});
  let text = "";
  const answer = new Promise<string>((resolve) => {
    socket.on("data", (d: Buffer) => {
      text += d.toString("latin1");
      if (text.includes("\r\n\r\n") && !ended) {
        ended = performance.now();
        resolve(text);
      }
    });
    socket.on("close", () => resolve(text));
  });
  socket.write(
    `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
      "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
  );
  return { socket, answer, text: () => text, ms: () => (ended || performance.now()) - started };
}

const fds = () => readdirSync("/proc/self/fd").length;

/** `count()` once it is at most `most`, or after `ms`. */
async function settle(count: () => number, most: number, ms: number): Promise<number> {
  const until = Date.now() + ms;
  let now = count();
  while (now > most && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 100));
    now = count();
  }
  return now;
}

const logLine = (path: string) => gw.logs.lines.find((l) => l.msg === "request" && l.path === path);

describe("a route's timeout is a deadline for the whole response", () => {
  it("answers 504 at the route's 1 s deadline while a longer route of the same upstream is still served", async () => {
    // Six bytes at 300 ms each: 1.8 s, past the other route's deadline and within its own.
    const [slowHead, served] = await Promise.all([
      send(gw.url, { path: "/quick/head" }),
      fetchBody("/patient/body?bytes=6"),
    ]);
    expect(slowHead.status).toBe(504);
    expect(slowHead.ms).toBeGreaterThanOrEqual(1000);
    expect(slowHead.ms).toBeLessThan(1700);
    expect(slowHead.headers["content-type"]).toBe("application/problem+json");
    expect(slowHead.json()).toMatchObject({
      type: "https://tollgate.dev/problems/upstream-timeout",
      status: 504,
      detail: 'upstream "api" did not answer within 1000 ms, the timeout of route "quick"',
    });
    expect(served).toMatchObject({ status: 200, body: "xxxxxx", complete: true });
    expect(served.ms).toBeGreaterThan(1500);
    expect(logLine("/quick/head")).toMatchObject({ route: "quick", status: 504, upstream_error: "timeout" });
    expect(logLine("/patient/body")).toMatchObject({ route: "patient", status: 200 });
    expect(logLine("/patient/body")!.upstream_error).toBeUndefined();
  });

  it("cuts a response whose head went out when its body trickles past the deadline", async () => {
    const cut = await fetchBody("/quick/body?bytes=20");
    expect(cut.status).toBe(200);
    expect(cut.complete).toBe(false);
    // A byte every 300 ms for about a second: a few of the twenty, never all.
    expect(cut.body.length).toBeGreaterThan(0);
    expect(cut.body.length).toBeLessThan(8);
    expect(cut.ms).toBeGreaterThanOrEqual(1000);
    expect(cut.ms).toBeLessThan(1700);
    expect(logLine("/quick/body")).toMatchObject({ route: "quick", status: 200, upstream_error: "timeout" });
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(metrics).toMatch(/tollgate_upstream_errors_total\{upstream="api",reason="timeout"\} 2/);
  });

  it("counts from dispatch: a request still waiting for a connection gets its 504, and is never sent", async () => {
    // undici's own timeouts start once a request is written: they never see this wait.
    const holding = fetchBody("/holder/body?bytes=6");
    await new Promise((r) => setTimeout(r, 100));
    const waiting = await send(gw.url, { path: "/queued/body?bytes=1" });
    expect(waiting.status).toBe(504);
    expect(waiting.ms).toBeGreaterThanOrEqual(1000);
    expect(waiting.ms).toBeLessThan(1600);
    expect(waiting.json<{ detail: string }>().detail).toBe(
      'upstream "single" did not answer within 1000 ms, the timeout of route "queued"',
    );
    expect(await holding).toMatchObject({ status: 200, body: "xxxxxx", complete: true });
    // The connection came free after the deadline: the abandoned request was dropped, unsent.
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).toContain("/holder/body?bytes=6");
    expect(seen).not.toContain("/queued/body?bytes=1");
  });

  it("a route's shorter connect_timeout bounds its wait for a connection, and only its own", async () => {
    const holding = fetchBody("/holder/body?bytes=4");
    await new Promise((r) => setTimeout(r, 100));
    const hasty = await send(gw.url, { path: "/hasty/body?bytes=1" });
    expect(hasty.status).toBe(504);
    expect(hasty.ms).toBeGreaterThanOrEqual(300);
    expect(hasty.ms).toBeLessThan(800);
    expect(hasty.json<{ detail: string }>().detail).toBe(
      'no connection to upstream "single" within 300 ms, the connect_timeout of route "hasty"',
    );
    expect(logLine("/hasty/body")).toMatchObject({ status: 504, upstream_error: "connect_timeout" });
    // The route that holds the connection, and the pool's 2 s for the others, are untouched.
    expect(await holding).toMatchObject({ status: 200, body: "xxxx", complete: true });
    await new Promise((r) => setTimeout(r, 300));
    expect(seen).not.toContain("/hasty/body?bytes=1");
  });

  it("bounds a WebSocket handshake, never the tunnel after its 101", async () => {
    const hung = rawHandshake("/ws/hang");
    const open = rawHandshake("/ws/echo");
    expect(await hung.answer).toMatch(/^HTTP\/1\.1 504 /);
    expect(hung.ms()).toBeGreaterThanOrEqual(1000);
    expect(hung.ms()).toBeLessThan(1700);
    expect(await open.answer).toMatch(/^HTTP\/1\.1 101 /);
    // Past the route's 1 s timeout, the tunnel still carries bytes both ways.
    await new Promise((r) => setTimeout(r, 1500));
    open.socket.write("ping");
    const until = Date.now() + 2000;
    while (!open.text().endsWith("ping") && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    expect(open.text().endsWith("\r\n\r\nping")).toBe(true);
    open.socket.destroy();
    hung.socket.destroy();
  });

  it("leaks nothing: the gateway's and the upstream's sockets close, and the fds come back", async () => {
    // Warm: whatever the first requests open for good (the pool, the admin server) is open now.
    await Promise.all([fetchBody("/quick/body?bytes=20"), send(gw.url, { path: "/quick/head" })]);
    const baseline = fds();
    const rounds = 10;
    const replies = await Promise.all(
      Array.from({ length: rounds }, (_, i) =>
        i % 2 === 0 ? fetchBody("/quick/body?bytes=20") : send(gw.url, { path: "/quick/head" }),
      ),
    );
    expect(replies.filter((r) => r.status === 504)).toHaveLength(rounds / 2);
    expect(replies.filter((r) => "complete" in r && r.complete === false)).toHaveLength(rounds / 2);
    // Every upstream connection the deadline cut is closed at once (the trickle would go on
    // otherwise). undici then opens a fresh connection in place of each aborted one, which
    // carries nothing and closes after the pool's keep-alive timeout (4 s).
    const carrying = () => [...upstreamSockets].filter((s) => s.bytesRead > 0).length;
    expect(await settle(carrying, 0, 2000)).toBe(0);
    expect(await settle(() => upstreamSockets.size, 0, 8000)).toBe(0);
    expect(await settle(fds, baseline + 2, 3000)).toBeLessThanOrEqual(baseline + 2);
  });
});
