// Three targets behind one upstream, the built CLI in front (issue 16's acceptance): traffic
// spread by weight; one target killed mid-load loses no idempotent request, and a POST fails
// (502) only if it was on its way to that target; the dead target ejected within 1 s and readmitted within one
// health interval after it comes back; no request waits longer than the connect timeout; the
// gateway's file descriptors where they were; a clean exit.
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";

interface Target {
  name: string;
  port: number;
  server: Server;
  /** Request ids (x-n) in arrival order, with their method. */
  got: { n: string; method: string }[];
  start(): Promise<void>;
  kill(): void;
}

const HEALTH_INTERVAL_MS = 500;
const CONNECT_TIMEOUT_MS = 1000;

async function target(name: string, port = 0): Promise<Target> {
  const t: Target = {
    name,
    port,
    server: null as unknown as Server,
    got: [],
    async start() {
      t.server = createServer((req, res) => {
        if (req.url === "/healthz") {
          res.end("ok");
          return;
        }
        t.got.push({ n: String(req.headers["x-n"]), method: req.method ?? "" });
        req.resume();
        // A few ms per request, so that some are in flight when a target dies.
        req.on("end", () =>
          setTimeout(() => {
            res.setHeader("x-target", name);
            res.end(name);
          }, 2),
        );
      });
      await new Promise<void>((resolve) => t.server.listen(t.port, "127.0.0.1", resolve));
      t.port = (t.server.address() as AddressInfo).port;
    },
    kill() {
      t.server.close();
      t.server.closeAllConnections();
    },
  };
  await t.start();
  return t;
}

let a: Target;
let b: Target;
let c: Target;
let gw: GatewayProcess;
let client: Pool;
let n = 0;
/** When B was killed (epoch ms). */
let killedAt = 0;

/**
 * The gateway's file descriptors, split into its pooled connections to the targets (open TCP
 * sockets to a target's port) and everything else. The pools may legitimately grow with the
 * load (up to its concurrency per target), so a leak shows as a descriptor outside them: a
 * socket no longer established, a socket gone from the kernel's table, a timer's or a file's.
 */
function fdCensus(): { pooled: Map<number, number>; other: number } {
  const pid = gw.child.pid;
  const established = new Map<string, number>(); // socket inode → remote port
  for (const table of ["tcp", "tcp6"]) {
    const lines = readFileSync(`/proc/${pid}/net/${table}`, "utf8").trim().split("\n").slice(1);
    for (const line of lines) {
      const f = line.trim().split(/\s+/);
      if (f[3] === "01") established.set(f[9]!, parseInt(f[2]!.split(":")[1]!, 16));
    }
  }
  const targetPorts = new Set([a.port, b.port, c.port]);
  const pooled = new Map<number, number>();
  let other = 0;
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    let link: string;
    try {
      link = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed while we looked
    }
    const port = established.get(/^socket:\[(\d+)\]$/.exec(link)?.[1] ?? "");
    if (port !== undefined && targetPorts.has(port)) pooled.set(port, (pooled.get(port) ?? 0) + 1);
    else other++;
  }
  return { pooled, other };
}

interface Sent {
  n: string;
  method: string;
  status: number;
  ms: number;
  /** Epoch ms, to compare with the kill. */
  startedAt: number;
}

async function one(method: "GET" | "POST"): Promise<Sent> {
  const id = String(++n);
  const startedAt = Date.now();
  const started = performance.now();
  const r = await client.request({
    method,
    path: `/api/${id}`,
    headers: { "x-n": id },
    body: method === "POST" ? `order ${id}` : null,
  });
  await r.body.text();
  return { n: id, method, status: r.statusCode, ms: performance.now() - started, startedAt };
}

/** `count` requests, `concurrency` at a time; `during(done)` is called after each one. */
async function load(
  count: number,
  concurrency: number,
  method: (i: number) => "GET" | "POST",
  during: (done: number) => void = () => {},
): Promise<Sent[]> {
  const out: Sent[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        out.push(await one(method(i)));
        during(out.length);
      }
    }),
  );
  return out;
}

async function until(what: string, ok: () => boolean, ms: number): Promise<number> {
  const start = performance.now();
  while (!ok()) {
    if (performance.now() - start > ms) throw new Error(`${what} not seen within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return performance.now() - start;
}

beforeAll(async () => {
  [a, b, c] = await Promise.all([target("a"), target("b"), target("c")]);
  gw = await spawnGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: memory:// }
upstreams:
  api:
    targets:
      - http://127.0.0.1:${a.port}
      - http://127.0.0.1:${b.port}
      - { url: "http://127.0.0.1:${c.port}", weight: 2 }
    retries: 2
    connect_timeout: ${CONNECT_TIMEOUT_MS}ms
    health: { path: /healthz, interval: ${HEALTH_INTERVAL_MS}ms, timeout: 200ms }
routes:
  - { name: api, match: { path: /api }, upstream: api }
`);
  client = new Pool(gw.url, { connections: 16 });
});

afterAll(async () => {
  if (client && !client.closed) await client.close();
  await gw?.stop();
  for (const t of [a, b, c]) t?.server.close();
});

describe("three targets behind one upstream", () => {
  let otherFdsWarm = 0;

  it("spreads 400 requests within 15 % of the weights 1:1:2", async () => {
    const sent = await load(400, 16, () => "GET");
    expect(sent.every((s) => s.status === 200)).toBe(true);
    const share = [a, b, c].map((t) => t.got.length / 400);
    const expected = [0.25, 0.25, 0.5];
    for (const [i, s] of share.entries())
      expect(Math.abs(s - expected[i]!) / expected[i]!).toBeLessThanOrEqual(0.15);
    otherFdsWarm = fdCensus().other;
  });

  it("one target killed mid-load: no GET lost, a POST fails only if it was on its way there, none waits past the connect timeout", async () => {
    for (const t of [a, b, c]) t.got = [];
    const sent = await load(
      800,
      16,
      // Every third: not in step with the balancer's cycle of four, so POSTs reach every target.
      (i) => (i % 3 === 2 ? "POST" : "GET"),
      (done) => {
        if (done === 200) {
          killedAt = Date.now();
          b.kill();
        }
      },
    );
    expect(killedAt).toBeGreaterThan(0);
    expect(sent.filter((s) => s.method === "GET" && s.status !== 200)).toEqual([]);
    // A POST fails only if it was on its way to B when B died: B had read it, or the gateway
    // had written it on a connection B then reset (neither side can tell those apart, so it is
    // not sent twice). Every POST sent after the kill found B refusing and went elsewhere.
    const failedPosts = sent.filter((s) => s.method === "POST" && s.status !== 200);
    expect(failedPosts.filter((s) => s.status !== 502 || s.startedAt > killedAt)).toEqual([]);
    // A POST is never sent twice: each one answered was received by exactly one target.
    const received = [...a.got, ...b.got, ...c.got].filter((g) => g.method === "POST").map((g) => g.n);
    expect(received.length).toBe(new Set(received).size);
    expect(Math.max(...sent.map((s) => s.ms))).toBeLessThan(CONNECT_TIMEOUT_MS);

    const ejected = gw.lines.find(
      (l) =>
        Number(l.time) >= killedAt &&
        l.msg === "upstream target ejected" &&
        l.target === `http://127.0.0.1:${b.port}`,
    );
    expect(ejected).toBeDefined();
    expect(Number(ejected!.time) - killedAt).toBeLessThan(1000);
  });

  it("the dead target is readmitted within one health interval after it comes back, and gets traffic again", async () => {
    let restartedAt = Number.POSITIVE_INFINITY;
    const returned = () =>
      gw.lines.some(
        (l) =>
          Number(l.time) >= restartedAt &&
          l.msg === "upstream target returned" &&
          l.by === "health_check" &&
          l.target === `http://127.0.0.1:${b.port}`,
      );
    // Still out: the checks keep it ejected while it is down.
    await new Promise((r) => setTimeout(r, HEALTH_INTERVAL_MS + 100));
    restartedAt = killedAt;
    expect(returned()).toBe(false);
    restartedAt = Date.now();
    await b.start();
    const ms = await until("the return", returned, HEALTH_INTERVAL_MS * 2);
    // Within one interval, plus the check's own round trip and the log line's way here.
    expect(ms).toBeLessThan(HEALTH_INTERVAL_MS + 250);
    b.got = [];
    const sent = await load(80, 8, () => "GET");
    expect(sent.every((s) => s.status === 200)).toBe(true);
    expect(b.got.length).toBeGreaterThanOrEqual(15);
  });

  it("leaves the gateway's file descriptors where they were, and exits cleanly", async () => {
    // Pooled connections are per target and capped by the load's concurrency (16); what a
    // leak would add (a socket per dead attempt, one left half-closed, a timer-held check) is
    // outside them.
    const { pooled, other } = fdCensus();
    for (const count of pooled.values()) expect(count).toBeLessThanOrEqual(16);
    expect(other).toBeLessThanOrEqual(otherFdsWarm + 2);
    await client.close();
    expect(await gw.stop()).toBe(0);
  });
});
