// HTTP/2 abuse against the built gateway's TLS listener (issue 16): rapid reset (CVE-2023-44487,
// 10 000 streams opened and cancelled), more streams than a connection may open, and header
// floods (endless CONTINUATION frames, header lists past the limits). Each costs its attacker the
// connection; meanwhile a well-behaved HTTP/2 client is served throughout, and afterwards the
// gateway's open file descriptors and RSS are back where they were.
import { readdirSync, readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeCertificate } from "../support/certs.js";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import {
  ERROR,
  FLAG,
  FRAME,
  frame,
  getFields,
  h2Connect,
  h2Request,
  headerBlock,
  type RawH2,
  rawH2,
  rstStream,
} from "../support/h2.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let upstream: TestUpstream;
let gw: GatewayProcess;
let port: number;

beforeAll(async () => {
  upstream = await startUpstream();
  const cert = makeCertificate();
  gw = await spawnGateway(
    `
listen:
  address: 127.0.0.1:0
  tls: { cert_file: ${cert.certFile}, key_file: ${cert.keyFile} }
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: "memory://" }
upstreams: { api: ${upstream.url} }
plans:
  anonymous: { global: { rate: 100000/s, burst: 100000 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
    // A leak would exhaust this; garbage (what an attack leaves plenty of) never does. With the
    // default limits V8 lets the heap grow under such an allocation rate and keeps the pages.
    { NODE_OPTIONS: "--max-old-space-size=64" },
  );
  port = Number(new URL(gw.url).port);
}, 30_000);
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
});

const fds = () => readdirSync(`/proc/${gw.child.pid}/fd`).length;
const rssMb = () =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${gw.child.pid}/status`, "utf8"))![1]) / 1024;
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A well-behaved client asking every 20 ms while `work` runs (and at least ten times); every
 * answer must be a 200.
 */
async function servedThroughout<T>(
  work: () => Promise<T>,
): Promise<{ result: T; statuses: number[]; slowestMs: number }> {
  const session = h2Connect(gw.url);
  const statuses: number[] = [];
  let slowestMs = 0;
  let running = true;
  const loop = (async () => {
    while (running || statuses.length < 10) {
      const started = performance.now();
      statuses.push(
        await h2Request(session, "/good").then(
          (r) => r.status,
          () => 0,
        ),
      );
      slowestMs = Math.max(slowestMs, performance.now() - started);
      await pause(20);
    }
  })();
  const result = await work();
  running = false;
  await loop;
  session.close();
  return { result, statuses, slowestMs };
}

/** Waits for the gateway to close `raw` (at most `ms`), then says how it ended. */
async function ending(raw: RawH2, ms = 5000): Promise<{ closed: boolean; goaway: number | undefined }> {
  const closed = await Promise.race([raw.closed.then(() => true), pause(ms).then(() => false)]);
  const goaway = raw.goawayCode();
  raw.destroy();
  return { closed, goaway };
}

let baseline: { fds: number; rssMb: number };

describe("HTTP/2 abuse", () => {
  it("warms up, and notes the gateway's descriptors and memory", async () => {
    const session = h2Connect(gw.url);
    for (let i = 0; i < 200; i++) expect((await h2Request(session, "/warm")).status).toBe(200);
    session.close();
    await pause(1000);
    baseline = { fds: fds(), rssMb: rssMb() };
  });

  it("rapid reset: 10 000 streams opened and cancelled cost a connection per hundred or so", async () => {
    const before = upstream.received.length;
    const block = headerBlock(getFields("/reset"));
    // Ten attackers, each opening and cancelling 1000 streams in batches of 50, on a new
    // connection whenever the gateway closes theirs.
    const attacker = async () => {
      const goaways: (number | undefined)[] = [];
      let sent = 0;
      while (sent < 1000) {
        const raw = await rawH2(port);
        let id = 1;
        while (sent < 1000 && !raw.socket.destroyed && raw.goawayCode() === undefined) {
          const frames: Buffer[] = [];
          for (let i = 0; i < 50; i++, id += 2, sent++) {
            frames.push(
              frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, id, block),
              rstStream(id, ERROR.CANCEL),
            );
          }
          // A PING after each batch: the next goes out once the gateway has read this one.
          const token = Buffer.alloc(8);
          token.writeUInt32BE(id);
          frames.push(frame(FRAME.PING, 0, 0, token));
          raw.write(Buffer.concat(frames));
          await raw
            .waitFor(
              (f) => f.type === FRAME.GOAWAY || (f.type === FRAME.PING && f.payload.equals(token)),
              2000,
            )
            .catch(() => undefined);
        }
        goaways.push((await ending(raw, 3000)).goaway);
      }
      return goaways;
    };
    const { result, statuses, slowestMs } = await servedThroughout(() =>
      Promise.all(Array.from({ length: 10 }, attacker)),
    );
    const goaways = result.flat();
    // Every connection but each attacker's last (which ran out of streams to send) was closed
    // by the gateway, telling its client why.
    const closedByGateway = goaways.filter((g) => g === ERROR.ENHANCE_YOUR_CALM).length;
    expect(closedByGateway).toBeGreaterThanOrEqual(goaways.length - 10);
    expect(goaways.length).toBeGreaterThan(20);
    expect(gw.lines.filter((l) => String(l.msg).includes("rapid reset")).length).toBe(closedByGateway);
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(slowestMs).toBeLessThan(2000);
    // A stream cancelled before its turn is not forwarded: most of the 10 000 never were.
    expect(upstream.received.length - before).toBeLessThan(5000);
  }, 60_000);

  it("more streams than a connection may open: refused, and the connection closed", async () => {
    const { result, statuses } = await servedThroughout(() =>
      Promise.all(
        Array.from({ length: 5 }, async () => {
          const raw = await rawH2(port);
          const block = headerBlock([
            [":method", "POST"],
            [":scheme", "https"],
            [":authority", "localhost"],
            [":path", "/upload"],
          ]);
          const frames: Buffer[] = [];
          // Bodies that never come: each stream stays open.
          for (let i = 0, id = 1; i < 1000; i++, id += 2)
            frames.push(frame(FRAME.HEADERS, FLAG.END_HEADERS, id, block));
          raw.write(Buffer.concat(frames));
          return ending(raw);
        }),
      ),
    );
    expect(result.every((r) => r.closed)).toBe(true);
    expect(statuses.every((s) => s === 200)).toBe(true);
    // At most 100 streams were let through on any of them.
    const settings = await rawH2(port);
    const serverSettings = await settings.waitFor((f) => f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK));
    settings.destroy();
    const values = new Map<number, number>();
    for (let i = 0; i + 6 <= serverSettings.payload.length; i += 6)
      values.set(serverSettings.payload.readUInt16BE(i), serverSettings.payload.readUInt32BE(i + 2));
    expect(values.get(0x3)).toBe(100); // SETTINGS_MAX_CONCURRENT_STREAMS
    expect(values.get(0x6)).toBe(16 * 1024); // SETTINGS_MAX_HEADER_LIST_SIZE
  }, 30_000);

  it("header floods: endless CONTINUATION frames and oversized header lists cost the connection or the stream", async () => {
    const { result, statuses } = await servedThroughout(async () => {
      const continuation = await Promise.all(
        Array.from({ length: 5 }, async () => {
          const raw = await rawH2(port);
          raw.write(frame(FRAME.HEADERS, 0, 1, headerBlock(getFields("/flood"))));
          const frames: Buffer[] = [];
          for (let i = 0; i < 10_000; i++)
            frames.push(frame(FRAME.CONTINUATION, 0, 1, headerBlock([[`x-${i}`, "v"]])));
          raw.write(Buffer.concat(frames));
          return ending(raw);
        }),
      );
      // 100 streams of 60 KB header blocks each, once the limits are known to the client.
      const raw = await rawH2(port);
      await pause(100);
      let id = 1;
      for (let s = 0; s < 100; s++, id += 2) {
        const block = headerBlock([
          ...getFields("/big"),
          ...Array.from({ length: 60 }, (_, j): [string, string] => [`x-h${j}`, "v".repeat(1000)]),
        ]);
        for (let at = 0; at < block.length; at += 16_000) {
          const last = at + 16_000 >= block.length;
          raw.write(
            frame(
              at === 0 ? FRAME.HEADERS : FRAME.CONTINUATION,
              (last ? FLAG.END_HEADERS : 0) | (at === 0 ? FLAG.END_STREAM : 0),
              id,
              block.subarray(at, at + 16_000),
            ),
          );
        }
      }
      await pause(1000);
      const resets = raw.frames.filter((f) => f.type === FRAME.RST_STREAM).length;
      const answered = raw.frames.filter((f) => f.type === FRAME.HEADERS).length;
      raw.destroy();
      return { continuation, resets, answered };
    });
    expect(result.continuation.every((r) => r.closed)).toBe(true);
    // Every oversized stream was reset or refused with a 431; none reached the upstream.
    expect(result.resets + result.answered).toBe(100);
    expect(upstream.received.filter((r) => r.url === "/big" || r.url === "/flood")).toEqual([]);
    expect(statuses.every((s) => s === 200)).toBe(true);
  }, 30_000);

  it("leaves the gateway's descriptors and memory where they were, and serving", async () => {
    await pause(3000);
    const after = { fds: fds(), rssMb: rssMb() };
    console.log(
      `h2 abuse: fds ${baseline.fds} → ${after.fds}, RSS ${baseline.rssMb.toFixed(1)} → ${after.rssMb.toFixed(1)} MB`,
    );
    expect(after.fds).toBeLessThanOrEqual(baseline.fds + 2);
    expect(after.rssMb - baseline.rssMb).toBeLessThan(40);
    const session = h2Connect(gw.url);
    expect((await h2Request(session, "/final")).status).toBe(200);
    session.close();
    expect(gw.child.exitCode).toBeNull();
  }, 30_000);
});
