// `npm run bench:share`: another caller's latency while one caller tries to hold an upstream's
// whole pool, with `caller_share` at 100% (nothing held back for others: how the gateway behaved
// before caller_share) and at its default 25%. The holder opens HOLD_CONNECTIONS HTTP/2
// connections of HOLD_STREAMS POST streams each (3 × 100 by default) and never finishes their
// bodies, as the outside attack did; meanwhile the other caller sends SAMPLES GETs, one every
// 25 ms, and their p50/p99 are printed, beside the same GETs with nobody holding anything.
//
// One gateway process per setting (built dist/), the upstream in its own process; loopback only.
//   HOLD_CONNECTIONS (3)  HOLD_STREAMS (100)  SAMPLES (200)
import { mkdtempSync, writeFileSync } from "node:fs";
import { connect } from "node:http2";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, killAll, root, selfSignedCert, start, startUpstream } from "./support.mjs";

const HOLD_CONNECTIONS = Number(process.env.HOLD_CONNECTIONS ?? 3);
const HOLD_STREAMS = Number(process.env.HOLD_STREAMS ?? 100);
const SAMPLES = Number(process.env.SAMPLES ?? 200);

async function startGateway(share, upstream, cert) {
  const port = await freePort();
  const config = join(mkdtempSync(join(tmpdir(), "tollgate-bench-share-")), "gateway.yaml");
  writeFileSync(
    config,
    `listen: { address: 127.0.0.1:${port}, tls: { cert_file: ${cert.cert}, key_file: ${cert.key} } }
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
upstreams: { api: { url: ${upstream}, connections: 128, caller_share: ${share}, timeout: 10s } }
clients:
  - { id: holder, key: key-holder, plan: big }
  - { id: other, key: key-other, plan: big }
plans:
  big: { global: { rate: 100000/s, burst: 100000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
  );
  const child = await start(
    `gateway ${share}`,
    process.execPath,
    [join(root, "dist/cli.js"), "--config", config],
    (l) => l.includes("tollgate listening"),
  );
  return { url: `https://127.0.0.1:${port}`, child };
}

function session(url) {
  const s = connect(url, { rejectUnauthorized: false, settings: { maxConcurrentStreams: 1000 } });
  s.on("error", () => {});
  return s;
}

/** Streams that announce a body and never finish it; resolves once each was answered or waits. */
function hold(url) {
  const sessions = [];
  const refused = { count: 0 };
  for (let c = 0; c < HOLD_CONNECTIONS; c++) {
    const s = session(url);
    sessions.push(s);
    for (let i = 0; i < HOLD_STREAMS; i++) {
      const stream = s.request({
        ":method": "POST",
        ":path": "/upload",
        "x-api-key": "key-holder",
        "content-length": "1000000",
      });
      stream.on("error", () => {});
      stream.on("response", (h) => {
        if (h[":status"] === 429) refused.count++;
      });
      stream.write("x".repeat(10));
    }
  }
  return {
    refused,
    close: () => {
      for (const s of sessions) s.destroy();
    },
  };
}

/**
 * The other caller's latencies: SAMPLES GETs sent open loop, one every 25 ms on one session
 * (a request waiting for a connection does not hold back the next), each timed to its answer.
 */
async function latencies(url) {
  const s = session(url);
  const ms = await Promise.all(
    Array.from(
      { length: SAMPLES },
      (_, i) =>
        new Promise((resolve) => {
          setTimeout(() => {
            const started = performance.now();
            const r = s.request({ ":path": "/", "x-api-key": "key-other" });
            r.resume();
            r.on("end", () => resolve(performance.now() - started));
            r.on("error", () => resolve(Number.POSITIVE_INFINITY));
            r.end();
          }, i * 25);
        }),
    ),
  );
  s.close();
  ms.sort((a, b) => a - b);
  const at = (q) => ms[Math.min(ms.length - 1, Math.floor(q * ms.length))].toFixed(1);
  return { p50: at(0.5), p99: at(0.99), max: ms[ms.length - 1].toFixed(1) };
}

try {
  const cert = selfSignedCert(mkdtempSync(join(tmpdir(), "tollgate-bench-share-tls-")));
  const upstream = await startUpstream();
  for (const share of ["100%", "25%"]) {
    const gw = await startGateway(share, upstream, cert);
    const quiet = await latencies(gw.url);
    const holder = hold(gw.url);
    await new Promise((r) => setTimeout(r, 1000));
    let attacked;
    try {
      attacked = await latencies(gw.url);
    } finally {
      holder.close();
    }
    console.log(
      `caller_share ${share.padStart(4)}: other caller alone p50 ${quiet.p50} ms p99 ${quiet.p99} ms; ` +
        `while ${HOLD_CONNECTIONS}x${HOLD_STREAMS} held: p50 ${attacked.p50} ms p99 ${attacked.p99} ms max ${attacked.max} ms; ` +
        `holder's streams refused: ${holder.refused.count}`,
    );
    gw.child.kill("SIGKILL");
  }
} finally {
  killAll();
}
