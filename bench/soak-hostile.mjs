// `npm run soak`: a hostile-input soak against a running gateway, on loopback only, bounded in
// time (SOAK_SECONDS, default 60) and in connections. Random bytes, malformed request lines,
// giant headers, slowloris clients, smuggling attempts, h2c upgrades, refused and half-closed
// WebSocket handshakes, unbalanced quotes in Forwarded and Expect: 100-continue uploads run side
// by side with well-formed requests; the gateway's RSS and open file descriptors are sampled
// throughout. It passes if the process stays up, RSS ends within SOAK_RSS_GROWTH_MB (default 40)
// of where it started after warm-up, its fds end within SOAK_FD_GROWTH (default 20) of where
// they started, no attack got what it was after (an h2c switch, a forged caller IP, a body
// invited before a 429, a socket left open), and a well-formed request at the end is served.
//
// An HTTP/2 phase follows (SOAK_H2_SECONDS, default 30) against a second gateway listening with
// TLS (a self-signed certificate made by openssl): rapid reset (streams opened and cancelled at
// once, on a new connection each time the gateway closes one), more streams than a connection
// may open, endless CONTINUATION frames, header lists past the limit, and connections held open
// with PINGs only, beside well-formed HTTP/2 requests; that gateway's RSS and fds are judged the
// same way. It runs after the HTTP/1.1 phase, not beside it: on two cores, the two gateways and
// their clients would slow each other and blur what each phase says. That gateway runs with
// --max-old-space-size=64: every stream the attacks open and cancel leaves a few kilobytes of
// garbage, and uncapped, V8 grows its heap to 170-180 MB before it next collects (a plateau,
// not a leak: it stays there in longer runs). The cap keeps the soak about leaks: one would
// still run the gateway out of heap, or its RSS past the limit, while garbage is collected.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { connect as connectH2 } from "node:http2";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import {
  ENHANCE_YOUR_CALM,
  FLAG,
  FRAME,
  frame,
  request as h2Fields,
  headerBlock,
  rawH2,
} from "./h2-frames.mjs";
import { selfSignedCert } from "./support.mjs";

const SECONDS = Number(process.env.SOAK_SECONDS ?? 60);
const RSS_GROWTH_MB = Number(process.env.SOAK_RSS_GROWTH_MB ?? 40);
const FD_GROWTH = Number(process.env.SOAK_FD_GROWTH ?? 20);
const SLOWLORIS = Number(process.env.SOAK_SLOWLORIS ?? 300);
/** How long the HTTP/2 phase runs, after the HTTP/1.1 one. */
const H2_SECONDS = Number(process.env.SOAK_H2_SECONDS ?? 30);
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
# Shorter than the 75s default, so the idle attacks below see the close within their 9 s.
idle_timeout: 5s
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
// The same config on a TLS listener, for the HTTP/2 phase.
selfSignedCert(dir);
const tlsConfigFile = join(dir, "gateway-tls.yaml");
writeFileSync(
  tlsConfigFile,
  readFileSync(configFile, "utf8").replace(
    "listen: 127.0.0.1:0",
    `listen: { address: "127.0.0.1:0", tls: { cert_file: tls.crt, key_file: tls.key } }`,
  ),
);
// Its old generation capped at SOAK_H2_OLD_SPACE_MB, default 64 (0: uncapped; see the file's header).
const H2_OLD_SPACE_MB = Number(process.env.SOAK_H2_OLD_SPACE_MB ?? 64);
const tlsGateway = startProcess([
  ...(H2_OLD_SPACE_MB > 0 ? [`--max-old-space-size=${H2_OLD_SPACE_MB}`] : []),
  "dist/cli.js",
  "--config",
  tlsConfigFile,
]);
tlsGateway.lines.on("line", () => {});
// Listened for now: its start line may come while the other gateway's is awaited.
const tlsStarted = waitForLine(tlsGateway, (l) => l.msg === "tollgate listening");
gateway.lines.on("line", () => {});
const listening = await waitForLine(gateway, (l) => l.msg === "tollgate listening");
const proxy = new URL(listening.proxy);
const port = Number(proxy.port);
let gatewayExited = null;
const fdBeforeTraffic = readdirSync(`/proc/${gateway.child.pid}/fd`).length;
gateway.child.on("exit", (code, signal) => {
  gatewayExited = { code, signal };
});
const tlsListening = await tlsStarted;
const tlsPort = Number(new URL(tlsListening.proxy).port);
const tlsUrl = `https://127.0.0.1:${tlsPort}`;
let tlsGatewayExited = null;
const tlsFdBeforeTraffic = readdirSync(`/proc/${tlsGateway.child.pid}/fd`).length;
tlsGateway.child.on("exit", (code, signal) => {
  tlsGatewayExited = { code, signal };
});

const fdCount = (pid = gateway.child.pid) => readdirSync(`/proc/${pid}/fd`).length;

const rssMb = (pid = gateway.child.pid) => {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
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

// --- the HTTP/2 phase, against the TLS gateway, once the HTTP/1.1 one is over ---
const h2Deadline = Date.now() + H2_SECONDS * 1000;
const h2Running = [];
const h2Counts = {};
const h2Count = (name) => {
  h2Counts[name] = (h2Counts[name] ?? 0) + 1;
};
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
/** Waits up to `ms` for the gateway to close `raw`; true if it did. */
const closedWithin = (raw, ms) =>
  Promise.race([raw.closed.then(() => true), pause(ms).then(() => false)]).finally(() =>
    raw.socket.destroy(),
  );

const H2_ATTACKS = {
  // Opened and cancelled at once, 50 a batch, a PING after each so the next goes out once the
  // gateway has read it; the gateway must close the connection telling why (ENHANCE_YOUR_CALM).
  "rapid reset": async () => {
    const raw = await rawH2(tlsPort);
    // A caller whose requests are admitted: a denied one is answered before its reset arrives,
    // which is a plain flood, limited like any other.
    const block = headerBlock(h2Fields("GET", "/reset", [["x-api-key", "good-key"]]));
    let id = 1;
    for (let batch = 0; batch < 40 && raw.goaway === undefined && !raw.socket.destroyed; batch++) {
      const frames = [];
      for (let i = 0; i < 50; i++, id += 2) {
        frames.push(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, block));
        frames.push(frame(FRAME.RST_STREAM, 0, id, Buffer.from([0, 0, 0, 8])));
      }
      const token = randomBytes(8);
      frames.push(frame(FRAME.PING, 0, 0, token));
      raw.write(Buffer.concat(frames));
      await raw.waitFor(
        (f) => f.type === FRAME.GOAWAY || (f.type === FRAME.PING && f.payload.equals(token)),
        3000,
      );
    }
    const closed = await closedWithin(raw, 3000);
    return raw.goaway === ENHANCE_YOUR_CALM && closed
      ? "held (GOAWAY ENHANCE_YOUR_CALM)"
      : `BREACH: 2000 cancelled streams and the connection ${closed ? `closed, GOAWAY ${raw.goaway}` : "still open"}`;
  },
  // 1000 streams whose bodies never come: 100 may be open; the rest refused, the connection cut.
  "many streams": async () => {
    const raw = await rawH2(tlsPort);
    const block = headerBlock(h2Fields("POST", "/upload"));
    const frames = [];
    for (let i = 0, id = 1; i < 1000; i++, id += 2)
      frames.push(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block));
    raw.write(Buffer.concat(frames));
    return (await closedWithin(raw, 6000)) ? "held (closed)" : "BREACH: the gateway left the connection open";
  },
  "CONTINUATION flood": async () => {
    const raw = await rawH2(tlsPort);
    raw.write(frame(FRAME.HEADERS, 0, 1, headerBlock(h2Fields("GET", "/flood"))));
    const frames = [];
    for (let i = 0; i < 10_000; i++)
      frames.push(frame(FRAME.CONTINUATION, 0, 1, headerBlock([[`x-${i}`, "v"]])));
    raw.write(Buffer.concat(frames));
    return (await closedWithin(raw, 6000)) ? "held (closed)" : "BREACH: the gateway left the connection open";
  },
  // 20 streams with 60 KB header lists each: none may be answered but by a reset or a 431.
  "header lists past the limit": async () => {
    const raw = await rawH2(tlsPort);
    await pause(50);
    const extra = Array.from({ length: 60 }, (_, j) => [`x-h${j}`, "v".repeat(1000)]);
    for (let s = 0, id = 1; s < 20; s++, id += 2) {
      const block = headerBlock(h2Fields("GET", "/big", [["x-api-key", "good-key"], ...extra]));
      for (let at = 0; at < block.length; at += 16_000) {
        const last = at + 16_000 >= block.length;
        const flags = (last ? FLAG.END_HEADERS : 0) | (at === 0 ? FLAG.END_STREAM : 0);
        raw.write(
          frame(at === 0 ? FRAME.HEADERS : FRAME.CONTINUATION, flags, id, block.subarray(at, at + 16_000)),
        );
      }
    }
    await raw.waitFor(() => raw.resets + raw.responses.length >= 20, 3000);
    const answered = raw.responses.length;
    await closedWithin(raw, 0);
    // A response here is the gateway's 431 (the header block is measured before the upstream).
    return answered + raw.resets >= 20 || raw.goaway !== undefined
      ? "held (reset, refused or closed)"
      : `unexpected: ${answered} answered, ${raw.resets} reset`;
  },
  // PINGs and nothing else: the gateway closes a connection without a stream after its idle time.
  "idle with PINGs": async () => {
    const raw = await rawH2(tlsPort);
    const ping = setInterval(() => raw.write(frame(FRAME.PING, 0, 0, Buffer.alloc(8))), 1000);
    const closed = await closedWithin(raw, 9000);
    clearInterval(ping);
    return closed ? "held (closed when idle)" : "BREACH: an idle connection kept open by PINGs";
  },
};
// Well-formed HTTP/2 requests alongside, on long-lived sessions.
const h2WellFormed = { ok: 0, other: 0 };
const h2Get = (session, path) =>
  new Promise((resolve) => {
    const stream = session.request({ ":path": path, "x-api-key": "good-key" });
    stream.setTimeout(5000, () => stream.close());
    let status = 0;
    stream.on("response", (h) => {
      status = h[":status"];
    });
    stream.on("error", () => {});
    stream.on("close", () => resolve(status));
    stream.resume();
    stream.end();
  });
const h2Session = () => {
  const session = connectH2(tlsUrl, { rejectUnauthorized: false });
  session.on("error", () => {});
  return session;
};
for (let w = 0; w < 2; w++) {
  h2Running.push(
    (async () => {
      let session = h2Session();
      while (Date.now() < h2Deadline) {
        if (session.closed || session.destroyed) session = h2Session();
        if ((await h2Get(session, "/ok")) === 200) h2WellFormed.ok++;
        else h2WellFormed.other++;
      }
      session.close();
    })(),
  );
}

const h2Kinds = Object.keys(H2_ATTACKS);
for (let w = 0; w < 4; w++) {
  h2Running.push(
    (async () => {
      let i = w;
      while (Date.now() < h2Deadline) {
        const kind = h2Kinds[i++ % h2Kinds.length];
        h2Count(`${kind} → ${await H2_ATTACKS[kind]().catch((err) => `error ${err.code ?? err.message}`)}`);
      }
    })(),
  );
}
// The TLS gateway's RSS, judged like the other's: after a 5 s warm-up, then every 5 s.
const tlsSamples = [];
await new Promise((r) => setTimeout(r, Math.min(5000, H2_SECONDS * 250)));
const tlsRssStart = rssMb(tlsGateway.child.pid);
const tlsFdStart = fdCount(tlsGateway.child.pid);
const tlsSampler = setInterval(() => {
  if (!tlsGatewayExited) tlsSamples.push(rssMb(tlsGateway.child.pid));
}, 5000);
await Promise.all(h2Running);
clearInterval(tlsSampler);
await new Promise((r) => setTimeout(r, 2000));
const tlsAlive = tlsGatewayExited === null;
const tlsRssEnd = tlsAlive ? rssMb(tlsGateway.child.pid) : Number.NaN;
const tlsFdEnd = tlsAlive ? fdCount(tlsGateway.child.pid) : Number.NaN;
let h2FinalStatus = 0;
if (tlsAlive) {
  const session = h2Session();
  h2FinalStatus = await h2Get(session, "/final");
  session.close();
}

gateway.child.kill("SIGTERM");
tlsGateway.child.kill("SIGTERM");
upstream.child.kill("SIGTERM");

const result = {
  seconds: SECONDS,
  gatewayAlive: alive,
  rssStartMb: Math.round(rssStart * 10) / 10,
  rssEndMb: Math.round(rssEnd * 10) / 10,
  rssMaxMb: Math.round(Math.max(rssStart, ...samples) * 10) / 10,
  rssSamplesMb: samples.map((mb) => Math.round(mb)),
  fdBeforeTraffic,
  fdStart,
  fdEnd,
  hostile: counts,
  slowlorisConnectionsCut: slowCut,
  wellFormed,
  finalRequestStatus: finalStatus,
  http2: {
    seconds: H2_SECONDS,
    gatewayAlive: tlsAlive,
    rssStartMb: Math.round(tlsRssStart * 10) / 10,
    rssEndMb: Math.round(tlsRssEnd * 10) / 10,
    rssMaxMb: Math.round(Math.max(tlsRssStart, ...tlsSamples) * 10) / 10,
    rssSamplesMb: tlsSamples.map((mb) => Math.round(mb)),
    fdBeforeTraffic: tlsFdBeforeTraffic,
    fdStart: tlsFdStart,
    fdEnd: tlsFdEnd,
    hostile: h2Counts,
    wellFormed: h2WellFormed,
    finalRequestStatus: h2FinalStatus,
  },
};
console.log(JSON.stringify(result, null, 2));
const breaches = [...Object.keys(counts), ...Object.keys(h2Counts)].filter(
  (k) => k.includes("BREACH") || k.includes("unexpected") || k.includes("error"),
);
const passed =
  alive &&
  finalStatus === 200 &&
  rssEnd - rssStart < RSS_GROWTH_MB &&
  fdEnd - Math.min(fdStart, fdBeforeTraffic) <= FD_GROWTH &&
  breaches.length === 0 &&
  wellFormed.ok > 0 &&
  tlsAlive &&
  h2FinalStatus === 200 &&
  tlsRssEnd - tlsRssStart < RSS_GROWTH_MB &&
  tlsFdEnd - Math.min(tlsFdStart, tlsFdBeforeTraffic) <= FD_GROWTH &&
  h2WellFormed.ok > 0;
if (breaches.length) console.log(`attacks that got through: ${breaches.join("; ")}`);
console.log(passed ? "soak passed" : "soak FAILED");
process.exit(passed ? 0 : 1);
