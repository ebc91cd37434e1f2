// `npm run soak`: a hostile-input soak against a running gateway, on loopback only, bounded in
// time (SOAK_SECONDS, default 60) and in connections. Random bytes, malformed request lines,
// giant headers, slowloris clients and smuggling attempts run side by side with well-formed
// requests; the gateway's RSS is sampled throughout. It passes if the process stays up, RSS ends
// within SOAK_RSS_GROWTH_MB (default 40) of where it started after warm-up, and a well-formed
// request at the end is served.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const RSS_GROWTH_MB = Number(process.env.SOAK_RSS_GROWTH_MB ?? 40);
const SLOWLORIS = Number(process.env.SOAK_SLOWLORIS ?? 300);
const root = new URL("..", import.meta.url).pathname;

function startProcess(args, env = {}) {
  const child = spawn(process.execPath, args, {
    cwd: root,
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, ...env },
  });
  const lines = createInterface({ input: child.stdout });
  return { child, lines };
}

function waitForLine(proc, test) {
  return new Promise((resolve, reject) => {
    proc.lines.on("line", (line) => {
      try {
        const parsed = JSON.parse(line);
        if (test(parsed)) resolve(parsed);
      } catch {}
    });
    proc.child.on("exit", (code) => reject(new Error(`exited with ${code}`)));
  });
}

const upstream = startProcess(["bench/upstream.mjs"]);
const upstreamPort = (await waitForLine(upstream, (l) => l.listening)).listening;

const dir = mkdtempSync(join(tmpdir(), "tollgate-soak-"));
const configFile = join(dir, "gateway.yaml");
writeFileSync(
  configFile,
  `listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
upstreams: { api: http://127.0.0.1:${upstreamPort} }
clients:
  - { id: good, key: good-key, plan: paid }
plans:
  anonymous: { global: { rate: 100/s, burst: 200 } }
  paid: { global: { rate: 100000/s, burst: 100000 } }
routes:
  - { name: upload, match: { path: /upload }, upstream: api, max_body: 4kb }
  - { name: default, match: { path: / }, upstream: api }
`,
);
const gateway = startProcess(["dist/cli.js", "--config", configFile]);
gateway.lines.on("line", () => {});
const listening = await waitForLine(gateway, (l) => l.msg === "tollgate listening");
const proxy = new URL(listening.proxy);
const port = Number(proxy.port);
let gatewayExited = null;
gateway.child.on("exit", (code, signal) => {
  gatewayExited = { code, signal };
});

const rssMb = () => {
  const status = readFileSync(`/proc/${gateway.child.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
};

const counts = {};
const count = (name) => {
  counts[name] = (counts[name] ?? 0) + 1;
};

/** Opens a socket, writes `bytes`, waits for the gateway to answer or close, at most 3 s. */
function fire(bytes, name) {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1");
    const timer = setTimeout(() => socket.destroy(), 3000);
    let status = "closed";
    socket.on("data", (c) => {
      const m = /^HTTP\/1\.1 (\d{3})/.exec(c.toString("latin1"));
      if (m) status = m[1];
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      count(`${name} → ${status}`);
      resolve();
    });
    socket.write(bytes);
  });
}

const HOSTILE = {
  "random bytes": () => randomBytes(1 + Math.floor(Math.random() * 4096)),
  "malformed request line": () =>
    [
      "GET\r\n\r\n",
      "GET / HTTP/9.9\r\nHost: x\r\n\r\n",
      `${"A".repeat(9000)} / HTTP/1.1\r\n\r\n`,
      "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n",
      "\r\n\r\n\r\n",
      "GET /\u0000 HTTP/1.1\r\nHost: x\r\n\r\n",
    ][Math.floor(Math.random() * 6)],
  "giant headers": () =>
    `GET / HTTP/1.1\r\nHost: x\r\nX-Big: ${"b".repeat(20_000 + Math.floor(Math.random() * 80_000))}\r\n\r\n`,
  "many headers": () => `GET / HTTP/1.1\r\nHost: x\r\n${"X-A: 1\r\n".repeat(3000)}\r\n`,
  "CL.TE smuggling": () =>
    "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
  "TE.CL smuggling": () =>
    "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
  "obfuscated TE": () => "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
  "path tricks": () =>
    `GET /%2e%2e/%c0%af${randomBytes(4).toString("hex")}/..%2f HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
  "oversized body": () =>
    `POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n${"1000\r\n".concat("z".repeat(4096), "\r\n").repeat(3)}0\r\n\r\n`,
};

const deadline = Date.now() + SECONDS * 1000;
const running = [];

// Hostile one-shot connections: 8 at a time, round robin over the kinds.
const kinds = Object.keys(HOSTILE);
for (let w = 0; w < 8; w++) {
  running.push(
    (async () => {
      let i = w;
      while (Date.now() < deadline) {
        const kind = kinds[i++ % kinds.length];
        await fire(HOSTILE[kind](), kind);
      }
    })(),
  );
}

// Slowloris: SLOWLORIS sockets that drip one header line a second and reconnect when cut off.
let slowCut = 0;
for (let s = 0; s < SLOWLORIS; s++) {
  running.push(
    (async () => {
      while (Date.now() < deadline) {
        await new Promise((resolve) => {
          const socket = connect(port, "127.0.0.1");
          socket.on("error", () => {});
          socket.write("GET / HTTP/1.1\r\nHost: x\r\n");
          const drip = setInterval(() => {
            if (Date.now() >= deadline) socket.destroy();
            else if (socket.writable) socket.write(`X-${Math.random().toString(36).slice(2, 6)}: 1\r\n`);
          }, 1000);
          socket.on("close", () => {
            clearInterval(drip);
            if (Date.now() < deadline) slowCut++;
            resolve();
          });
        });
      }
    })(),
  );
}

// Well-formed traffic alongside, so the soak also shows the gateway keeps serving.
const wellFormed = { ok: 0, other: 0 };
const get = (path, headers = {}) =>
  new Promise((resolve) => {
    const req = request({ host: "127.0.0.1", port, path, headers, agent: false, timeout: 5000 }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(0));
    req.end();
  });
for (let w = 0; w < 4; w++) {
  running.push(
    (async () => {
      while (Date.now() < deadline) {
        const status = await get("/ok", { "x-api-key": "good-key" });
        if (status === 200) wellFormed.ok++;
        else wellFormed.other++;
      }
    })(),
  );
}

// RSS: after a 5 s warm-up, then every 5 s.
const samples = [];
await new Promise((r) => setTimeout(r, Math.min(5000, SECONDS * 250)));
const rssStart = rssMb();
const sampler = setInterval(() => {
  if (!gatewayExited) samples.push(rssMb());
}, 5000);
await Promise.all(running);
clearInterval(sampler);
// Let the gateway settle (timers for cut connections, GC), then measure again.
await new Promise((r) => setTimeout(r, 2000));
const alive = gatewayExited === null;
const rssEnd = alive ? rssMb() : Number.NaN;
const finalStatus = alive ? await get("/final", { "x-api-key": "good-key" }) : 0;

gateway.child.kill("SIGTERM");
upstream.child.kill("SIGTERM");

const result = {
  seconds: SECONDS,
  gatewayAlive: alive,
  rssStartMb: Math.round(rssStart * 10) / 10,
  rssEndMb: Math.round(rssEnd * 10) / 10,
  rssMaxMb: Math.round(Math.max(rssStart, ...samples) * 10) / 10,
  hostile: counts,
  slowlorisConnectionsCut: slowCut,
  wellFormed,
  finalRequestStatus: finalStatus,
};
console.log(JSON.stringify(result, null, 2));
const passed = alive && finalStatus === 200 && rssEnd - rssStart < RSS_GROWTH_MB && wellFormed.ok > 0;
console.log(passed ? "soak passed" : "soak FAILED");
process.exit(passed ? 0 : 1);
