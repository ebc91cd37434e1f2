// Several targets behind one upstream, in-process against real sockets: retries only for what
// is safe to repeat, on another target, within the budget; the request charged once; each
// target addressed by its own Host; passive ejection said in a log line and counted; a
// WebSocket handshake sent on to a target that accepts it; a reload that keeps health.
import { writeFileSync } from "node:fs";
import { request } from "node:http";
import type { Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { deadPort } from "../support/ports.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let live: TestUpstream;
let other: TestUpstream;
/** Resets every request's connection without answering. */
let resetter: TestUpstream;
let deadA: number;
let deadB: number;
let deadC: number;
let gw: InProcessGateway;

const config = () => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: health-token-for-upstream-tests }
log: { level: info, requests: false }
store: { url: memory:// }
upstreams:
  refusing: { targets: [http://127.0.0.1:${deadA}, ${live.url}], retries: 1 }
  resetting: { targets: [${resetter.url}, ${other.url}], retries: 1 }
  down: { targets: [http://127.0.0.1:${deadA}, http://127.0.0.1:${deadB}], retries: 1 }
  noretry: { targets: [http://127.0.0.1:${deadB}, ${live.url}] }
  ws: { targets: [http://127.0.0.1:${deadC}, ${live.url}], retries: 1 }
  sick: { targets: [${live.url}], health: { path: /bad-health, interval: 200ms, timeout: 100ms } }
plans:
  anonymous: { global: { rate: 1/h, burst: 1000 } }
routes:
  - { name: refusing, match: { path: /refusing }, upstream: refusing }
  - { name: resetting, match: { path: /resetting }, upstream: resetting }
  - { name: down, match: { path: /down }, upstream: down }
  - { name: noretry, match: { path: /noretry }, upstream: noretry }
  - { name: override, match: { path: /override }, upstream: noretry, retries: 1 }
  - { name: sick, match: { path: /sick }, upstream: sick }
  - { name: ws, match: { path: /ws }, upstream: ws }
headers: [legacy]
`;

const metrics = async () => (await send(gw.adminUrl, { path: "/metrics" })).body;
const metric = (text: string, line: string) => {
  const m = new RegExp(`^${line.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, "m").exec(text);
  return m ? Number(m[1]) : 0;
};

beforeAll(async () => {
  [live, other, resetter] = await Promise.all([startUpstream(), startUpstream(), startUpstream()]);
  resetter.handle = (req) => req.socket.destroy();
  live.handle = (req, res) => {
    const bad = req.url === "/bad-health";
    res.writeHead(bad ? 503 : 200, { "content-type": "text/plain" });
    res.end(bad ? "sick" : req.url);
  };
  deadA = await deadPort();
  deadB = await deadPort();
  deadC = await deadPort();
  gw = await startGateway(config());
});
afterAll(async () => {
  await gw?.stop();
  await Promise.all([live?.close(), other?.close(), resetter?.close()]);
});

describe("retries", () => {
  it("a POST that never reached a target is sent to another, body and all", async () => {
    const r = await send(gw.url, { method: "POST", path: "/refusing/a", body: "payload" });
    expect(r.status).toBe(200);
    expect(live.received.at(-1)).toMatchObject({ method: "POST", url: "/refusing/a", body: "payload" });
  });

  it("GETs all succeed while a target refuses; it is ejected after three failures, said once, and the request is charged once", async () => {
    const remaining: number[] = [];
    for (let i = 0; i < 10; i++) {
      const r = await send(gw.url, { path: "/refusing/b" });
      expect(r.status).toBe(200);
      remaining.push(Number(r.headers["x-ratelimit-remaining"]));
    }
    // One debit per request, retried or not: the limiter decided before the first attempt.
    for (let i = 1; i < remaining.length; i++) expect(remaining[i]).toBe(remaining[i - 1]! - 1);
    const ejections = gw.logs.lines.filter(
      (l) => l.msg === "upstream target ejected" && l.upstream === "refusing",
    );
    expect(ejections).toEqual([
      expect.objectContaining({
        upstream: "refusing",
        target: `http://127.0.0.1:${deadA}`,
        by: "requests",
        reason: "refused",
        failures: 3,
        backoff_ms: 1000,
      }),
    ]);
    const text = await metrics();
    expect(metric(text, 'tollgate_upstream_ejections_total{upstream="refusing"}')).toBe(1);
    expect(metric(text, 'tollgate_upstream_targets{upstream="refusing",state="ejected"}')).toBe(1);
    expect(metric(text, 'tollgate_upstream_targets{upstream="refusing",state="healthy"}')).toBe(1);
    // The POST above and the first GETs before the ejection: three retries, all answered.
    expect(metric(text, 'tollgate_upstream_retries_total{upstream="refusing",outcome="success"}')).toBe(3);
    // The console's Health page: which target is out, since when and why.
    const health = await send(gw.adminUrl, {
      path: "/admin/health",
      headers: { authorization: "Bearer health-token-for-upstream-tests" },
    });
    const refusing = (health.json() as { upstreams: { name: string; targets: unknown[] }[] }).upstreams.find(
      (u) => u.name === "refusing",
    );
    expect(refusing?.targets).toEqual([
      {
        target: `http://127.0.0.1:${deadA}`,
        ejected: true,
        by: "requests",
        reason: "refused",
        since: expect.any(String),
      },
      { target: live.url, ejected: false },
    ]);
  });

  it("sends each target its own Host", async () => {
    const host = live.received.at(-1)!.headers.host;
    expect(host).toBe(`127.0.0.1:${live.port}`);
  });

  it("a POST reset after it was sent is a 502, never sent twice; a GET reset the same way is retried", async () => {
    const before = resetter.received.length;
    const post = await send(gw.url, { method: "POST", path: "/resetting/order", body: "once" });
    expect(post.status).toBe(502);
    expect(resetter.received.length).toBe(before + 1);
    expect(other.received.filter((r) => r.url === "/resetting/order")).toEqual([]);
    // Without a body, only the method says it: still not sent twice.
    await send(gw.url, { path: "/resetting/x" });
    const bare = await send(gw.url, { method: "POST", path: "/resetting/bare" });
    expect(bare.status).toBe(502);
    expect(other.received.filter((r) => r.url === "/resetting/bare")).toEqual([]);
    for (let i = 0; i < 4; i++) expect((await send(gw.url, { path: "/resetting/x" })).status).toBe(200);
    expect(resetter.received.slice(before).map((r) => r.method)).toContain("GET");
  });

  it("retries: 0 (the default) sends no retry; a route's retries overrides its upstream's", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 2; i++) statuses.push((await send(gw.url, { path: "/noretry" })).status);
    expect(statuses.sort()).toEqual([200, 502]);
    for (let i = 0; i < 4; i++) expect((await send(gw.url, { path: "/override" })).status).toBe(200);
  });

  it("a retry budget: with every target down, retries stop at the floor plus a fifth of the requests", async () => {
    for (let i = 0; i < 40; i++) expect((await send(gw.url, { path: "/down" })).status).toBe(502);
    const text = await metrics();
    const sent =
      metric(text, 'tollgate_upstream_retries_total{upstream="down",outcome="failure"}') +
      metric(text, 'tollgate_upstream_retries_total{upstream="down",outcome="success"}');
    expect(sent).toBe(10 + Math.floor(0.2 * 40));
    expect(metric(text, 'tollgate_upstream_retries_total{upstream="down",outcome="budget_exhausted"}')).toBe(
      40 - sent,
    );
    expect(
      gw.logs.lines.some(
        (l) => String(l.msg).startsWith("upstream has no healthy target") && l.upstream === "down",
      ),
    ).toBe(true);
  });
});

describe("WebSocket handshakes", () => {
  it("go to a target that accepts the connection: the first, refused, is retried on the other", async () => {
    live.server.on("upgrade", (_req, socket: Socket) => {
      socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
      socket.end();
    });
    const port = new URL(gw.url).port;
    for (let i = 0; i < 3; i++) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = request({
          port,
          host: "127.0.0.1",
          path: "/ws",
          headers: {
            connection: "Upgrade",
            upgrade: "websocket",
            "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
          },
        });
        req.on("upgrade", (res, socket) => {
          socket.destroy();
          resolve(res.statusCode ?? 0);
        });
        req.on("response", (res) => resolve(res.statusCode ?? 0));
        req.on("error", reject);
        req.end();
      });
      expect(status).toBe(101);
    }
    const text = await metrics();
    expect(
      metric(text, 'tollgate_upstream_retries_total{upstream="ws",outcome="success"}'),
    ).toBeGreaterThanOrEqual(1);
  });
});

async function until(what: string, ok: () => Promise<boolean>, ms = 2000): Promise<void> {
  const start = performance.now();
  while (!(await ok())) {
    if (performance.now() - start > ms) throw new Error(`${what} not seen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("active health checks", () => {
  it("eject a target whose check fails at start, and /readyz names the upstream left with none, still ready", async () => {
    await until(
      "the failed check",
      async () => metric(await metrics(), 'tollgate_upstream_targets{upstream="sick",state="ejected"}') === 1,
    );
    const ready = await send(gw.adminUrl, { path: "/readyz" });
    expect(ready.status).toBe(200);
    expect(ready.json().reason).toContain('upstream "sick" has no healthy target (1 ejected)');
    expect(gw.logs.lines.filter((l) => l.upstream === "sick" && l.msg === "upstream target ejected")).toEqual(
      [expect.objectContaining({ target: live.url, by: "health_check", reason: "status 503" })],
    );
    // Its only target: sent to anyway (panic), and it answers.
    expect((await send(gw.url, { path: "/sick" })).status).toBe(200);
  });
});

describe("a reload", () => {
  const edited = (text: string) =>
    text.replace(/^ {2}noretry:.*\n/m, "").replace(/^ {2}- \{ name: (noretry|override).*\n/gm, "");

  it("keeps the health of an unchanged upstream, and drops a removed one", async () => {
    writeFileSync(gw.gateway.currentRuntime.file, edited(config()));
    expect(await gw.gateway.reload("admin")).toMatchObject({ ok: true, changed: true });
    const text = await metrics();
    // Rebuilt, it would be healthy until its checks failed twice again, and ejected twice.
    expect(metric(text, 'tollgate_upstream_targets{upstream="sick",state="ejected"}')).toBe(1);
    expect(text).not.toContain('upstream="noretry",state=');
    await new Promise((r) => setTimeout(r, 500));
    expect(metric(await metrics(), 'tollgate_upstream_ejections_total{upstream="sick"}')).toBe(1);
  });

  it("keeps the health of the targets a changed upstream keeps", async () => {
    writeFileSync(
      gw.gateway.currentRuntime.file,
      edited(config()).replace(
        `sick: { targets: [${live.url}]`,
        `sick: { targets: [${live.url}, ${other.url}]`,
      ),
    );
    expect(await gw.gateway.reload("admin")).toMatchObject({ ok: true, changed: true });
    const text = await metrics();
    expect(metric(text, 'tollgate_upstream_targets{upstream="sick",state="ejected"}')).toBe(1);
    expect(metric(text, 'tollgate_upstream_targets{upstream="sick",state="healthy"}')).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(metric(await metrics(), 'tollgate_upstream_ejections_total{upstream="sick"}')).toBe(1);
  });
});
