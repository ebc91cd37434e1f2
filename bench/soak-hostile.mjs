// `npm run soak`: a hostile-input soak against a running gateway, on loopback only, bounded in
// time (SOAK_SECONDS, default 60) and in connections. Random bytes, malformed request lines,
// giant headers, slowloris clients, smuggling attempts, h2c upgrades, refused and half-closed
// WebSocket handshakes, unbalanced quotes in Forwarded and Expect: 100-continue uploads run side
// by side with well-formed requests; the gateway's RSS and open file descriptors are sampled
// throughout. It passes if the process stays up, RSS ends within SOAK_RSS_GROWTH_MB (default 40)
// of where it started after warm-up, its fds end within SOAK_FD_GROWTH (default 20) of where
// they started, no attack got what it was after (an h2c switch, a forged caller IP, a body
// invited before a 429, a socket left open), and a well-formed request at the end is served.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const RSS_GROWTH_MB = Number(process.env.SOAK_RSS_GROWTH_MB ?? 40);
const FD_GROWTH = Number(process.env.SOAK_FD_GROWTH ?? 20);
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
tunnel_idle_timeout: 2s
identity:
  trusted_proxies: [127.0.0.1/32]
  client_ip_header: forwarded
  auth_failures: false
clients:
  - { id: good, key: good-key, plan: paid }
plans:
  anonymous: { global: { rate: 100/s, burst: 200 } }
  paid:
    global: { rate: 100000/s, burst: 100000 }
    routes:
      closed: { limit: 0 }
routes:
  - { name: upload, match: { path: /upload }, upstream: api, max_body: 4kb }
  - { name: closed, match: { path: /closed }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
deny: { ips: [10.0.0.7/32] }
`,
);
const gateway = startProcess(["dist/cli.js", "--config", configFile]);
gateway.lines.on("line", () => {});
const listening = await waitForLine(gateway, (l) => l.msg === "tollgate listening");
const proxy = new URL(listening.proxy);
const port = Number(proxy.port);
let gatewayExited = null;
const fdBeforeTraffic = readdirSync(`/proc/${gateway.child.pid}/fd`).length;
gateway.child.on("exit", (code, signal) => {
  gatewayExited = { code, signal };
});

const fdCount = () => readdirSync(`/proc/${gateway.child.pid}/fd`).length;

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

/**
 * Conversations: a socket that writes, reads, maybe writes again, and names its outcome. The
 * client never closes first unless the case says so: the gateway must. `ok` outcomes start
 * with "held"; anything else is an attack that got through.
 */
function converse(name, steps) {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    let text = "";
    let outcome = null;
    const timer = setTimeout(() => {
      outcome ??= "BREACH: the gateway left the socket open";
      socket.destroy();
    }, 6000);
    socket.on("data", (c) => {
      text += c.toString("latin1");
      outcome ??= steps.onData?.(text, socket) ?? null;
    });
    socket.on("error", () => {});
    // The gateway's FIN is what counts: this side stays open (allowHalfOpen) until then.
    socket.on("end", () => socket.destroy());
    socket.on("close", () => {
      clearTimeout(timer);
      count(`${name} → ${outcome ?? steps.onClose?.(text) ?? "closed"}`);
      resolve();
    });
    socket.write(steps.first);
  });
}

const WS = (path, key) =>
  `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n` +
  `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${key ? `x-api-key: ${key}\r\n` : ""}\r\n`;

const CONVERSATIONS = {
  // curl --http2 against an upstream that would switch: served as HTTP/1.1, and the next request
  // on the connection is checked (limit: 0 → 429).
  "h2c upgrade": () =>
    converse("h2c upgrade", {
      first:
        "GET /h2c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" +
        "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nx-api-key: good-key\r\n\r\n" +
        "GET /closed HTTP/1.1\r\nHost: x\r\nx-api-key: good-key\r\nConnection: close\r\n\r\n",
      onClose: (text) =>
        text.startsWith("HTTP/1.1 101")
          ? "BREACH: switched protocols"
          : /^HTTP\/1\.1 200[\s\S]*HTTP\/1\.1 429/.test(text)
            ? "held (200 then 429)"
            : `unexpected ${text.slice(0, 12)}`,
    }),
  "refused websocket": () =>
    converse("refused websocket", {
      first: [WS("/ws", "bad-key"), WS("/closed", "good-key")][Math.floor(Math.random() * 2)],
      onClose: (text) =>
        /^HTTP\/1\.1 (401|429)/.test(text) ? "held (answered and closed)" : `unexpected ${text.slice(0, 12)}`,
    }),
  // A reset (RST) before the answer: Node leaves an upgraded or CONNECT socket without an error
  // handler, and one uncaught ECONNRESET used to end the process. The soak fails when it exits.
  "reset handshake": () =>
    new Promise((resolve) => {
      const socket = connect(port, "127.0.0.1");
      socket.on("error", () => {});
      socket.on("close", () => {
        count("reset handshake → held (reset sent)");
        resolve();
      });
      socket.write(
        [
          WS("/ws", "good-key"),
          WS("/ws", "bad-key"),
          WS("/ws"),
          "CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n",
        ][Math.floor(Math.random() * 4)],
      );
      setTimeout(() => socket.resetAndDestroy(), Math.floor(Math.random() * 3));
    }),
  "half-closed tunnel": () =>
    converse("half-closed tunnel", {
      first: WS("/ws", "good-key"),
      onData: (text, socket) => {
        if (text.startsWith("HTTP/1.1 101") && !socket.writableEnded) socket.end("bye");
        return null;
      },
      onClose: (text) =>
        text.startsWith("HTTP/1.1 101") ? "held (closed after FIN)" : `unexpected ${text.slice(0, 12)}`,
    }),
  "idle tunnel": () =>
    converse("idle tunnel", {
      first: WS("/ws", "good-key"),
      onClose: (text) =>
        text.startsWith("HTTP/1.1 101") ? "held (closed when idle)" : `unexpected ${text.slice(0, 12)}`,
    }),
  // The client's unterminated quote before the proxy's element: 10.0.0.7 is denied, 5.6.7.8 is
  // the real caller; a 403 means the quote picked the IP.
  "Forwarded quote": () =>
    converse("Forwarded quote", {
      first:
        'GET /fwd HTTP/1.1\r\nHost: x\r\nForwarded: for=10.0.0.7;x="\r\nForwarded: for=5.6.7.8\r\n' +
        "x-api-key: good-key\r\nConnection: close\r\n\r\n",
      onClose: (text) =>
        text.startsWith("HTTP/1.1 403")
          ? "BREACH: the quote chose the caller"
          : text.startsWith("HTTP/1.1 200")
            ? "held (200)"
            : `unexpected ${text.slice(0, 12)}`,
    }),
  "Expect upload": () =>
    converse("Expect upload", {
      first:
        "POST /upload HTTP/1.1\r\nHost: x\r\nx-api-key: good-key\r\nExpect: 100-continue\r\nContent-Length: 2048\r\nConnection: close\r\n\r\n",
      onData: (text, socket) => {
        if (text.startsWith("HTTP/1.1 100") && !socket.sentBody) {
          socket.sentBody = true;
          socket.write("u".repeat(2048));
        }
        return null;
      },
      onClose: (text) =>
        /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200/.test(text)
          ? "held (100 then 200)"
          : `unexpected ${text.slice(0, 40)}`,
    }),
  "Expect to a 429": () =>
    converse("Expect to a 429", {
      first:
        "POST /closed HTTP/1.1\r\nHost: x\r\nx-api-key: good-key\r\nExpect: 100-continue\r\nContent-Length: 5000000\r\n\r\n",
      onClose: (text) =>
        text.includes("100 Continue")
          ? "BREACH: body invited before the 429"
          : text.startsWith("HTTP/1.1 429")
            ? "held (429, closed)"
            : `unexpected ${text.slice(0, 12)}`,
    }),
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

// Upgrade, Forwarded and Expect conversations: 8 at a time.
const conversationKinds = Object.keys(CONVERSATIONS);
for (let w = 0; w < 8; w++) {
  running.push(
    (async () => {
      let i = w;
      while (Date.now() < deadline) await CONVERSATIONS[conversationKinds[i++ % conversationKinds.length]]();
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
const fdStart = fdCount();
const sampler = setInterval(() => {
  if (!gatewayExited) samples.push(rssMb());
}, 5000);
await Promise.all(running);
clearInterval(sampler);
// Let the gateway settle (timers for cut connections, GC), then measure again.
await new Promise((r) => setTimeout(r, 2000));
const alive = gatewayExited === null;
const rssEnd = alive ? rssMb() : Number.NaN;
const fdEnd = alive ? fdCount() : Number.NaN;
const finalStatus = alive ? await get("/final", { "x-api-key": "good-key" }) : 0;

gateway.child.kill("SIGTERM");
upstream.child.kill("SIGTERM");

const result = {
  seconds: SECONDS,
  gatewayAlive: alive,
  rssStartMb: Math.round(rssStart * 10) / 10,
  rssEndMb: Math.round(rssEnd * 10) / 10,
  rssMaxMb: Math.round(Math.max(rssStart, ...samples) * 10) / 10,
  fdBeforeTraffic,
  fdStart,
  fdEnd,
  hostile: counts,
  slowlorisConnectionsCut: slowCut,
  wellFormed,
  finalRequestStatus: finalStatus,
};
console.log(JSON.stringify(result, null, 2));
const breaches = Object.keys(counts).filter((k) => k.includes("BREACH") || k.includes("unexpected"));
const passed =
  alive &&
  finalStatus === 200 &&
  rssEnd - rssStart < RSS_GROWTH_MB &&
  fdEnd - Math.min(fdStart, fdBeforeTraffic) <= FD_GROWTH &&
  breaches.length === 0 &&
  wellFormed.ok > 0;
if (breaches.length) console.log(`attacks that got through: ${breaches.join("; ")}`);
console.log(passed ? "soak passed" : "soak FAILED");
process.exit(passed ? 0 : 1);
