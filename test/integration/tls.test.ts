// `listen: { address, tls }` (issue 16): one TLS listener whose ALPN offers h2 and http/1.1, and
// HTTP/2 clients served and limited exactly like HTTP/1.1 ones: Node's http2 client, undici with
// allowH2, curl --http2 and node:https take turns as one caller against one limit; the 429 is an
// HTTP/2 response with its problem; HTTP/2's own framing rules, the gateway's Host and path
// checks and its body rules hold; the certificate is reloaded when its files change, and a bad
// one is refused. The gateway runs in-process against a real redis-server.
import { execFile } from "node:child_process";
import { renameSync, writeFileSync } from "node:fs";
import { request as httpsRequest } from "node:https";
import { connect as netConnect } from "node:net";
import { dirname } from "node:path";
import { connect as connectTls } from "node:tls";
import { promisify } from "node:util";
import { Agent, request as undiciRequest } from "undici";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket, WebSocketServer } from "ws";
import { makeCertificate, type TestCertificate } from "../support/certs.js";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import {
  ERROR,
  FLAG,
  FRAME,
  frame,
  getFields,
  h2Connect,
  h2Request,
  headerBlock,
  rawH2,
  servedFingerprint,
} from "../support/h2.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const run = promisify(execFile);

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;
let cert: TestCertificate;
let base: string;
let port: number;

const config = (redisUrl: string, upstreamUrl: string, tls: TestCertificate) => `
listen:
  address: 127.0.0.1:0
  tls: { cert_file: ${tls.certFile}, key_file: ${tls.keyFile} }
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${redisUrl}, prefix: "tls:", timeout: 500ms }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: mixed, key: key-mixed, plan: ten }
  - { id: free, key: key-free, plan: open }
plans:
  ten: { global: { limit: 10, window: 1m } }
  open: { global: { rate: 1000/s, burst: 1000 }, routes: { closed: { limit: 0 } } }
routes:
  - { name: upload, match: { path: /upload }, upstream: api, max_body: 1kb }
  - { name: closed, match: { path: /closed }, upstream: api }
  - { name: hosted, match: { path: /hosted, host: api.example.com }, upstream: api }
  - { name: default, match: { path: / }, upstream: api }
headers: [ietf]
`;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  cert = makeCertificate();
  // Short idle and request timeouts, so the tests that wait for them are quick.
  process.on("warning", onWarning);
  gw = await startGateway(
    config(redis.url, upstream.url, cert),
    {},
    { keepAliveTimeout: 1500, headersTimeout: 1500 },
  );
  port = gw.gateway.proxyAddress!.port;
  base = `https://127.0.0.1:${port}`;
});
afterAll(async () => {
  process.off("warning", onWarning);
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

/** Node's process warnings: an HTTP/1.1-only header written on an HTTP/2 response raises one. */
const warnings: string[] = [];
const onWarning = (w: Error) => warnings.push(`${w.name}: ${w.message}`);

const MIXED = { "x-api-key": "key-mixed" };
const FREE = { "x-api-key": "key-free" };

/** A request over HTTP/1.1 on TLS (node:https), on a new connection. */
function h1(
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Record<string, unknown>; body: string; version: string }> {
  return new Promise((resolve, reject) => {
    const req = httpsRequest(
      { host: "127.0.0.1", port, path, headers, rejectUnauthorized: false, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: Buffer.concat(chunks).toString("utf8"),
            version: res.httpVersion,
          }),
        );
      },
    );
    req.on("error", reject);
    req.end();
  });
}

describe("one caller over HTTP/1.1 and HTTP/2 on one TLS listener", () => {
  it("is counted exactly across Node's http2, undici allowH2, curl --http2 and node:https: 10 of 20", async () => {
    const session = h2Connect(base);
    const undici = new Agent({ allowH2: true, connect: { rejectUnauthorized: false } });
    const clients: Record<
      string,
      () => Promise<{ status: number; protocol: string; headers: Record<string, unknown> }>
    > = {
      "node:http2": async () => {
        const r = await h2Request(session, "/a", { headers: MIXED });
        return { status: r.status, protocol: "2", headers: r.headers };
      },
      "node:https": async () => {
        const r = await h1("/a", MIXED);
        return { status: r.status, protocol: r.version, headers: r.headers };
      },
      "undici allowH2": async () => {
        const before = upstream.received.length;
        const r = await undiciRequest(`${base}/a`, { dispatcher: undici, headers: MIXED });
        await r.body.text();
        // undici does not say which protocol it spoke; the gateway's Via to the upstream does.
        const via = upstream.received.slice(before).at(-1)?.headers.via;
        return {
          status: r.statusCode,
          protocol: r.statusCode === 200 ? String(via).split(" ")[0]! : "?",
          headers: r.headers,
        };
      },
      "curl --http2": async () => {
        const { stdout } = await run("curl", [
          "-sk",
          "--http2",
          "-H",
          "x-api-key: key-mixed",
          "-o",
          "/dev/null",
          "-D",
          "-",
          "-w",
          "\n%{http_version} %{http_code}",
          `${base}/a`,
        ]);
        const [version, status] = stdout.trim().split("\n").at(-1)!.split(" ");
        const headers = Object.fromEntries(
          [...stdout.matchAll(/^([\w-]+): (.*)\r$/gm)].map((m) => [m[1]!.toLowerCase(), m[2]!]),
        );
        return { status: Number(status), protocol: version!, headers };
      },
    };
    const names = Object.keys(clients);
    const results: { client: string; status: number; protocol: string; headers: Record<string, unknown> }[] =
      [];
    for (let i = 0; i < 20; i++) {
      const client = names[i % names.length]!;
      results.push({ client, ...(await clients[client]!()) });
    }
    session.close();
    await undici.close();

    expect(results.filter((r) => r.status === 200)).toHaveLength(10);
    expect(results.filter((r) => r.status === 429)).toHaveLength(10);
    // The first ten, whichever protocol carried them, are the admitted ones.
    expect(results.slice(0, 10).every((r) => r.status === 200)).toBe(true);
    for (const r of results) {
      expect(r.headers["ratelimit-policy"], r.client).toBe('"ten.global";q=10;w=60');
      expect(r.headers.ratelimit, r.client).toMatch(/^"ten\.global";r=\d+;t=\d+$/);
    }
    expect(results.find((r) => r.client === "curl --http2")!.protocol).toBe("2");
    expect(results.find((r) => r.client === "undici allowH2" && r.status === 200)!.protocol).toBe("2");
    expect(results.find((r) => r.client === "node:https")!.protocol).toBe("1.1");
  });

  it("answers a 429 over HTTP/2 as an HTTP/2 response carrying the problem", async () => {
    const session = h2Connect(base);
    // The caller of the test above is spent.
    const r = await h2Request(session, "/a", { headers: MIXED });
    session.close();
    expect(r.status).toBe(429);
    expect(r.headers["content-type"]).toBe("application/problem+json");
    expect(Number(r.headers["retry-after"])).toBeGreaterThan(0);
    expect(r.headers.connection).toBeUndefined();
    expect(JSON.parse(r.body)).toMatchObject({ status: 429, "violated-policies": ["ten.global"] });
  });

  it("offers h2 then http/1.1 by ALPN, and serves HTTP/1.1 to a client offering neither", async () => {
    const alpn = (protocols: string[] | undefined) =>
      new Promise<string | false>((resolve, reject) => {
        const s = connectTls(
          {
            port,
            host: "127.0.0.1",
            rejectUnauthorized: false,
            ...(protocols ? { ALPNProtocols: protocols } : {}),
          },
          () => {
            resolve(s.alpnProtocol ?? false);
            s.destroy();
          },
        );
        s.on("error", reject);
      });
    expect(await alpn(["h2", "http/1.1"])).toBe("h2");
    expect(await alpn(["http/1.1", "h2"])).toBe("h2");
    expect(await alpn(["http/1.1"])).toBe("http/1.1");
    expect(await alpn(undefined)).toBe(false);
    expect((await h1("/plain", FREE)).status).toBe(200);
  });
});

describe("an HTTP/2 request as the upstream and the limits see it", () => {
  it("forwards no pseudo-header, says https and HTTP/2, and keys the caller by the TLS peer", async () => {
    const session = h2Connect(base);
    const before = upstream.received.length;
    const r = await h2Request(session, "/seen?q=1", { headers: { ...FREE, "x-custom": "kept" } });
    session.close();
    expect(r.status).toBe(200);
    const seen = upstream.received[before]!;
    expect(seen.url).toBe("/seen?q=1");
    expect(seen.rawHeaders.filter((_, i) => i % 2 === 0).some((n) => n.startsWith(":"))).toBe(false);
    expect(seen.headers["x-custom"]).toBe("kept");
    expect(seen.headers["x-forwarded-proto"]).toBe("https");
    expect(seen.headers["x-forwarded-for"]).toBe("127.0.0.1");
    expect(seen.headers["x-forwarded-host"]).toBe(`127.0.0.1:${port}`);
    expect(seen.headers.via).toBe("2 tollgate");
    expect(seen.headers.host).toBe(new URL(upstream.url).host);
    expect(seen.headers["tollgate-client"]).toBe("free");

    const h1Before = upstream.received.length;
    expect((await h1("/seen", FREE)).status).toBe(200);
    expect(upstream.received[h1Before]!.headers["x-forwarded-proto"]).toBe("https");
    expect(upstream.received[h1Before]!.headers.via).toBe("1.1 tollgate");
  });

  it("forwards a body sent without Content-Length, and counts it against max_body", async () => {
    const session = h2Connect(base);
    const before = upstream.received.length;
    const ok = await h2Request(session, "/upload", { headers: FREE, body: "x".repeat(600) });
    expect(ok.status).toBe(200);
    expect(upstream.received[before]!.body).toHaveLength(600);
    const tooLarge = await h2Request(session, "/upload", { headers: FREE, body: "x".repeat(5000) });
    expect(tooLarge.status).toBe(413);
    expect(JSON.parse(tooLarge.body)).toMatchObject({ status: 413 });
    // The session outlives the refusal.
    expect((await h2Request(session, "/after", { headers: FREE })).status).toBe(200);
    session.close();
  });

  it("routes by :authority, and refuses a Host that names another host than :authority", async () => {
    const hosted = h2Connect(base);
    const before = upstream.received.length;
    // Node's client sends the URL's authority unless told another.
    const byAuthority = await h2Request(hosted, "/hosted", {
      headers: { ...FREE, ":authority": "api.example.com" },
    });
    expect(byAuthority.status).toBe(200);
    expect(upstream.received[before]!.headers["x-forwarded-host"]).toBe("api.example.com");
    const elsewhere = await h2Request(hosted, "/hosted", { headers: FREE });
    expect(elsewhere.status).toBe(200); // the default route: no host of its own
    const both = await h2Request(hosted, "/hosted", {
      headers: { ...FREE, ":authority": "api.example.com", host: "other.example.com" },
    });
    expect(both.status).toBe(400);
    expect(JSON.parse(both.body).detail).toMatch(/:authority/);
    const userinfo = await h2Request(hosted, "/hosted", {
      headers: { ...FREE, ":authority": "u@api.example.com" },
    });
    expect(userinfo.status).toBe(400);
    hosted.close();
  });

  it("refuses a :method an HTTP/1.1 request line could not carry (post, Post), forwarding nothing", async () => {
    const session = h2Connect(base);
    const before = upstream.received.length;
    for (const method of ["post", "Post", "get"]) {
      const r = await h2Request(session, "/x", { headers: { ...FREE, ":method": method } });
      expect(r.status, method).toBe(400);
      expect(JSON.parse(r.body).detail).toMatch(/case-sensitive/);
    }
    expect(upstream.received.length).toBe(before);
    expect((await h2Request(session, "/x", { headers: { ...FREE, ":method": "POST" } })).status).toBe(200);
    session.close();
  });

  it("normalises :path as it normalises an HTTP/1.1 target, and refuses what it refuses", async () => {
    const session = h2Connect(base);
    const before = upstream.received.length;
    expect((await h2Request(session, "/x/../y//z", { headers: FREE })).status).toBe(200);
    expect(upstream.received[before]!.url).toBe("/y/z");
    const bad = await h2Request(session, "/a%00b", { headers: FREE });
    expect(bad.status).toBe(400);
    expect(JSON.parse(bad.body).detail).toMatch(/path/);
    session.close();
  });

  it("refuses more header fields than an HTTP/1.1 request may carry with the same 431", async () => {
    const session = h2Connect(base);
    const many: Record<string, string> = { ...FREE };
    for (let i = 0; i < 101; i++) many[`x-pad-${i}`] = "1";
    const r = await h2Request(session, "/many", { headers: many });
    expect(r.status).toBe(431);
    expect((await h1("/many", Object.fromEntries(Object.entries(many)))).status).toBe(431);
    session.close();
  });

  it("invites a body with 100 Continue only once admitted, and answers CONNECT with 405", async () => {
    const session = h2Connect(base);
    const continued = await new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
      const stream = session.request({
        ":path": "/upload",
        ":method": "POST",
        expect: "100-continue",
        ...FREE,
      });
      let continued = false;
      stream.on("continue", () => {
        continued = true;
        stream.end("body");
      });
      stream.on("response", (h) => {
        stream.resume();
        stream.on("end", () => resolve({ status: Number(h[":status"]), continued }));
      });
      stream.on("error", reject);
    });
    expect(continued).toEqual({ status: 200, continued: true });
    const refused = await new Promise<{ status: number; continued: boolean }>((resolve, reject) => {
      const stream = session.request({
        ":path": "/closed",
        ":method": "POST",
        expect: "100-continue",
        ...FREE,
      });
      let wasContinued = false;
      stream.on("continue", () => {
        wasContinued = true;
      });
      stream.on("response", (h) => {
        stream.resume();
        resolve({ status: Number(h[":status"]), continued: wasContinued });
        stream.close();
      });
      stream.on("error", reject);
    });
    expect(refused).toEqual({ status: 429, continued: false });
    const connect = await new Promise<number>((resolve, reject) => {
      const stream = session.request({ ":method": "CONNECT", ":authority": "example.com:443" });
      stream.on("response", (h) => resolve(Number(h[":status"])));
      stream.on("error", reject);
    });
    expect(connect).toBe(405);
    session.close();
  });
});

describe("HTTP/2's own rules", () => {
  it("resets a stream carrying a connection-specific field, forwards nothing, and keeps the connection", async () => {
    const raw = await rawH2(port);
    const before = upstream.received.length;
    const cases: [string, string][] = [
      ["connection", "close"],
      ["transfer-encoding", "chunked"],
      ["upgrade", "websocket"],
      ["keep-alive", "5"],
      ["te", "gzip"],
    ];
    let id = 1;
    for (const field of cases) {
      raw.write(
        frame(
          FRAME.HEADERS,
          FLAG.END_HEADERS | FLAG.END_STREAM,
          id,
          headerBlock([...getFields("/cs"), ["x-api-key", "key-free"], field]),
        ),
      );
      const rst = await raw.waitFor((f) => f.type === FRAME.RST_STREAM && f.stream === id);
      expect(rst.payload.readUInt32BE(0), field[0]).toBe(ERROR.PROTOCOL_ERROR);
      id += 2;
    }
    // The same request without the field is served on the same connection.
    raw.write(
      frame(
        FRAME.HEADERS,
        FLAG.END_HEADERS | FLAG.END_STREAM,
        id,
        headerBlock([...getFields("/cs"), ["x-api-key", "key-free"]]),
      ),
    );
    await raw.waitFor((f) => f.type === FRAME.HEADERS && f.stream === id);
    raw.destroy();
    expect(upstream.received.slice(before).map((r) => r.url)).toEqual(["/cs"]);
  });

  it("refuses a header block larger than the HTTP/1.1 limit (16 KiB) as HTTP/1.1 does, and keeps serving", async () => {
    const before = upstream.received.length;
    const big = { ...FREE, "x-big": "b".repeat(20_000) };
    // The first request of a connection goes out before the client has the server's SETTINGS,
    // so Node has not started enforcing SETTINGS_MAX_HEADER_LIST_SIZE: the gateway's 431.
    const session = h2Connect(base);
    const first = await h2Request(session, "/big", { headers: big });
    expect(first.status).toBe(431);
    expect(JSON.parse(first.body)).toMatchObject({ status: 431 });
    // Once they are acknowledged (a PING's round trip is after them), Node resets the stream.
    await new Promise((resolve) => session.ping(resolve));
    const later = await h2Request(session, "/big", { headers: big }).then(
      (r) => r.status,
      (err: Error & { code?: string }) => err.code,
    );
    expect(later).toBe("ERR_HTTP2_STREAM_ERROR");
    expect((await h2Request(session, "/small", { headers: FREE })).status).toBe(200);
    session.close();
    expect((await h1("/big", big)).status).toBe(431);
    expect(upstream.received.slice(before).map((r) => r.url)).toEqual(["/small"]);
  });
});

describe("HTTP/1.1 on the TLS listener", () => {
  it("serves an h2c upgrade as plain HTTP/1.1, never switching", async () => {
    const text = await new Promise<string>((resolve, reject) => {
      const s = connectTls(
        { port, host: "127.0.0.1", rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] },
        () => {
          s.write(
            "GET /h2c HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n" +
              "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nx-api-key: key-free\r\n\r\n" +
              "GET /closed HTTP/1.1\r\nHost: x\r\nx-api-key: key-free\r\nConnection: close\r\n\r\n",
          );
        },
      );
      let out = "";
      s.on("data", (d: Buffer) => {
        out += d.toString("latin1");
      });
      s.on("close", () => resolve(out));
      s.on("error", reject);
    });
    expect(text).not.toMatch(/^HTTP\/1\.1 101/);
    expect(text).toMatch(/^HTTP\/1\.1 200[\s\S]*HTTP\/1\.1 429/);
  });

  it("tunnels a WebSocket (wss) to the upstream through the same pipeline", async () => {
    const wss = new WebSocketServer({ server: upstream.server });
    wss.on("connection", (socket) => socket.on("message", (data) => socket.send(`echo:${data}`)));
    const ws = new WebSocket(`wss://127.0.0.1:${port}/ws`, { rejectUnauthorized: false, headers: FREE });
    const echoed = await new Promise<string>((resolve, reject) => {
      ws.on("open", () => ws.send("hi"));
      ws.on("message", (data) => resolve(String(data)));
      ws.on("error", reject);
    });
    ws.close();
    wss.close();
    expect(echoed).toBe("echo:hi");
  });
});

describe("clients that go away or never come", () => {
  it("aborts the upstream request of a stream the client resets, and ends the request", async () => {
    let upstreamClosedEarly = false;
    const answered = new Promise<void>((resolve) => {
      upstream.handle = (_req, res) => {
        res.on("close", () => {
          upstreamClosedEarly = !res.writableFinished;
          resolve();
        });
        // Head now, body later: the reset comes while the body is awaited.
        res.writeHead(200, { "content-type": "text/plain" });
        res.write("part");
        setTimeout(() => res.end("rest"), 1000);
      };
    });
    const session = h2Connect(base);
    const stream = session.request({ ":path": "/abandoned", ...FREE });
    stream.on("error", () => {});
    await new Promise((r) => stream.once("response", r));
    stream.close(0x8);
    await answered;
    upstream.handle = null;
    session.close();
    expect(upstreamClosedEarly).toBe(true);
    const inFlight = (gw.gateway as unknown as { inFlight: { count: number } }).inFlight;
    const deadline = Date.now() + 1000;
    while (inFlight.count > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(inFlight.count).toBe(0);
  });

  it("closes a connection whose TLS handshake does not finish within headersTimeout", async () => {
    const started = performance.now();
    await new Promise<void>((resolve) => {
      const socket = netConnect(port, "127.0.0.1");
      socket.on("error", () => {});
      socket.on("close", () => resolve());
    });
    expect(performance.now() - started).toBeGreaterThan(1000);
    expect(performance.now() - started).toBeLessThan(4000);
  });

  it("closes an idle HTTP/1.1 keep-alive connection on TLS after keepAliveTimeout", async () => {
    const closedAfter = await new Promise<number>((resolve, reject) => {
      const s = connectTls(
        { port, host: "127.0.0.1", rejectUnauthorized: false, ALPNProtocols: ["http/1.1"] },
        () => s.write("GET /idle HTTP/1.1\r\nHost: x\r\nx-api-key: key-free\r\n\r\n"),
      );
      let answeredAt = 0;
      s.on("data", () => {
        answeredAt ||= performance.now();
      });
      s.on("close", () => resolve(performance.now() - answeredAt));
      s.on("error", reject);
    });
    expect(closedAfter).toBeGreaterThan(1000);
    expect(closedAfter).toBeLessThan(4000);
  });

  it("never made Node warn of an HTTP/1.1 header on an HTTP/2 response", () => {
    expect(warnings.filter((w) => /connection header/i.test(w))).toEqual([]);
  });
});

describe("an HTTP/2 upload answered before its body", () => {
  /** Stream 1: a POST announcing 10 MB with `key`, of which 1000 bytes are sent. */
  const startUpload = async (key: string) => {
    const raw = await rawH2(port);
    const fields: [string, string][] = [
      [":method", "POST"],
      [":scheme", "https"],
      [":authority", "localhost"],
      [":path", "/upload"],
      ["x-api-key", key],
      ["content-length", "10000000"],
    ];
    raw.write(frame(FRAME.HEADERS, FLAG.END_HEADERS, 1, headerBlock(fields)));
    raw.write(frame(FRAME.DATA, 0, 1, Buffer.alloc(1000)));
    return raw;
  };

  it("is reset with NO_ERROR once its refusal is out, instead of being read until the request timeout", async () => {
    const raw = await startUpload("no-such-key");
    // The refusal (END_STREAM on its last frame), then the reset: the client stops sending.
    const answer = await raw.waitFor((f) => f.type === FRAME.HEADERS && f.stream === 1);
    expect(answer.stream).toBe(1);
    await raw.waitFor((f) => f.type === FRAME.RST_STREAM && f.stream === 1, 1500);
    expect(raw.rstCode(1)).toBe(ERROR.NO_ERROR);
    // The connection stays usable for the next request.
    raw.write(frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, 3, headerBlock(getFields("/after"))));
    await raw.waitFor((f) => f.type === FRAME.HEADERS && f.stream === 3);
    expect(raw.goawayCode()).toBeUndefined();
    raw.destroy();
  });

  it("is reset too when the upstream answers before reading it", async () => {
    upstream.handle = (_req, res) => {
      res.statusCode = 413;
      res.end("too big");
    };
    const raw = await startUpload("key-free");
    try {
      const answer = await raw.waitFor((f) => f.type === FRAME.HEADERS && f.stream === 1);
      expect(answer.stream).toBe(1);
      await raw.waitFor((f) => f.type === FRAME.RST_STREAM && f.stream === 1, 1500);
      expect(raw.rstCode(1)).toBe(ERROR.NO_ERROR);
    } finally {
      upstream.handle = null;
      raw.destroy();
    }
  });
});

describe("idle HTTP/2 connections", () => {
  it("closes a connection with no stream open after keepAliveTimeout, PINGs or not", async () => {
    const raw = await rawH2(port);
    const ping = setInterval(() => raw.write(frame(FRAME.PING, 0, 0, Buffer.alloc(8))), 200);
    const started = performance.now();
    await raw.waitFor((f) => f.type === FRAME.GOAWAY, 5000);
    clearInterval(ping);
    expect(raw.goawayCode()).toBe(ERROR.NO_ERROR);
    expect(performance.now() - started).toBeGreaterThan(1000);
    await raw.closed;
  });

  it("keeps a connection whose stream waits longer than that on its upstream", async () => {
    upstream.handle = (_req, res) => setTimeout(() => res.end("late"), 2500);
    const session = h2Connect(base);
    try {
      const r = await h2Request(session, "/slow", { headers: FREE });
      expect(r.status).toBe(200);
      expect(r.body).toBe("late");
    } finally {
      upstream.handle = null;
      session.close();
    }
  });
});

describe("the certificate", () => {
  /** Replaces a file the way cert-manager and editors do: a sibling renamed over it. */
  const replace = (file: string, text: string) => {
    writeFileSync(`${file}.tmp`, text);
    renameSync(`${file}.tmp`, file);
  };
  const until = async (probe: () => Promise<boolean>, ms = 4000) => {
    const deadline = Date.now() + ms;
    while (!(await probe())) {
      if (Date.now() > deadline) throw new Error("not in time");
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  it("is reloaded when its files change, without dropping an open HTTP/2 connection", async () => {
    expect(await servedFingerprint(port)).toBe(cert.fingerprint);
    const session = h2Connect(base);
    expect((await h2Request(session, "/before", { headers: FREE })).status).toBe(200);
    const next = makeCertificate("next", dirname(cert.certFile));
    // Key first: between the two writes the pair does not match, which is refused, not served.
    replace(cert.keyFile, next.key);
    replace(cert.certFile, next.cert);
    await until(async () => (await servedFingerprint(port)) === next.fingerprint);
    expect((await h2Request(session, "/after", { headers: FREE })).status).toBe(200);
    session.close();
    const reloaded = gw.logs.lines.find((l) => l.msg === "listener certificate reloaded");
    expect((reloaded?.tls as { fingerprint?: string })?.fingerprint).toBe(next.fingerprint);
    cert = { ...next, certFile: cert.certFile, keyFile: cert.keyFile };
  });

  it("keeps serving the previous certificate when the new files are not a usable pair", async () => {
    const refusalsBefore = gw.logs.lines.filter((l) =>
      l.msg?.toString().startsWith("config reload refused"),
    ).length;
    const other = makeCertificate("other");
    // A certificate whose key stays the old one: refused at key_file, with its position.
    replace(cert.certFile, other.cert);
    await until(
      async () =>
        gw.logs.lines.filter((l) => String(l.msg).startsWith("config reload refused")).length >
        refusalsBefore,
    );
    const refused = gw.logs.lines.filter((l) => String(l.msg).startsWith("config reload refused")).at(-1)!;
    expect(String((refused.problems as string[])[0])).toMatch(
      /:4:\d+: listen\.tls\.key_file: the key in .* does not belong/,
    );
    expect(await servedFingerprint(port)).toBe(cert.fingerprint);
    // Garbage in place of the certificate: the same.
    replace(cert.certFile, "not a certificate\n");
    await until(
      async () =>
        gw.logs.lines.filter((l) => String(l.msg).startsWith("config reload refused")).length >
        refusalsBefore + 1,
    );
    expect(await servedFingerprint(port)).toBe(cert.fingerprint);
    const session = h2Connect(base);
    expect((await h2Request(session, "/still", { headers: FREE })).status).toBe(200);
    session.close();
    // Back to a good pair: applied.
    replace(cert.keyFile, other.key);
    replace(cert.certFile, other.cert);
    await until(async () => (await servedFingerprint(port)) === other.fingerprint);
  });
});
