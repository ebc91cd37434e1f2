// HTTP hygiene at the edge: requests Node's parser refuses (ambiguous framing, oversized or
// malformed headers, slow clients) are answered with a problem and never reach the upstream;
// max_body caps a route's body whether it is announced or streamed.
import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { rawRequest } from "../support/raw.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const config = (upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: warn }
store: { url: "memory://" }
upstreams: { api: ${upstreamUrl} }
plans:
  anonymous:
    global: { rate: 1/m, burst: 1000 }
    routes:
      upload: { rate: 1/m, burst: 5 }
routes:
  - { name: upload, match: { path: /upload }, upstream: api, max_body: 1kb }
  - { name: default, match: { path: / }, upstream: api }
`;

let upstream: TestUpstream;
let gw: InProcessGateway;
beforeAll(async () => {
  upstream = await startUpstream();
  gw = await startGateway(
    config(upstream.url),
    {},
    { headersTimeout: 500, requestTimeout: 1500, connectionsCheckingInterval: 100 },
  );
});
afterAll(async () => {
  await gw?.stop();
  await upstream.close();
});

const head = (lines: string[]) => `${lines.join("\r\n")}\r\n\r\n`;

describe("requests the parser refuses never reach the upstream", () => {
  it.each([
    [
      "Content-Length and Transfer-Encoding together (CL.TE smuggling)",
      head(["POST / HTTP/1.1", "Host: x", "Content-Length: 6", "Transfer-Encoding: chunked"]) +
        "0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n",
      400,
    ],
    [
      "Transfer-Encoding then Content-Length (TE.CL)",
      head(["POST / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked", "Content-Length: 4"]) +
        "5c\r\nGPOST / HTTP/1.1\r\n\r\n0\r\n\r\n",
      400,
    ],
    [
      "two different Content-Lengths",
      head(["POST / HTTP/1.1", "Host: x", "Content-Length: 3", "Content-Length: 4"]) + "abcd",
      400,
    ],
    [
      "an obfuscated Transfer-Encoding",
      head(["POST / HTTP/1.1", "Host: x", "Transfer-Encoding: xchunked"]) + "0\r\n\r\n",
      400,
    ],
    [
      "chunked not last",
      head(["POST / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked, identity"]) + "0\r\n\r\n",
      400,
    ],
    [
      "an invalid chunk size",
      head(["POST / HTTP/1.1", "Host: x", "Transfer-Encoding: chunked"]) + "zz\r\nhello\r\n0\r\n\r\n",
      400,
    ],
    ["a folded header line", head(["GET / HTTP/1.1", "Host: x", "X-A: 1", " folded: yes"]), 400],
    ["a space before the colon", head(["GET / HTTP/1.1", "Host: x", "Content-Length : 0"]), 400],
    ["no Host header", head(["GET / HTTP/1.1", "X-A: 1"]), 400],
    ["a malformed request line", head(["GET /a b c HTTP/1.1", "Host: x"]), 400],
    ["random bytes", "\u0000\u00ff\u0013garbage\r\n\r\n", 400],
    ["headers larger than 16 KiB", head(["GET / HTTP/1.1", "Host: x", `X-Big: ${"a".repeat(20_000)}`]), 431],
  ])("%s: refused with a problem+json", async (_what, bytes, status) => {
    const before = upstream.received.length;
    const reply = await rawRequest(gw.url, bytes);
    expect(reply.status).toBe(status);
    expect(reply.text).toContain("application/problem+json");
    expect(upstream.received.length).toBe(before);
  });

  it("a client that never finishes its headers is cut off after headersTimeout", async () => {
    const started = performance.now();
    const closed = await new Promise<string>((resolve) => {
      const socket = connect(Number(new URL(gw.url).port), "127.0.0.1");
      let text = "";
      socket.on("data", (c: Buffer) => {
        text += c.toString();
      });
      socket.on("close", () => resolve(text));
      socket.on("error", () => {});
      socket.write("GET / HTTP/1.1\r\nHost: x\r\n");
      const drip = setInterval(() => socket.writable && socket.write("X-Slow: 1\r\n"), 100);
      socket.on("close", () => clearInterval(drip));
    });
    expect(performance.now() - started).toBeLessThan(2000);
    expect(closed).toMatch(/^HTTP\/1\.1 408/);
  });

  it("bytes after a Connection: close request do not replace its answer with a 400", async () => {
    // The POST is forwarded (the upstream may act on it): its client must get its answer, not a
    // 400 that invites a retry of a request already executed.
    const before = upstream.received.length;
    const reply = await rawRequest(
      gw.url,
      head(["POST /closing HTTP/1.1", "Host: x", "Content-Length: 2", "Connection: close"]) +
        "hiGET /after HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    expect(reply.status).toBe(200);
    // A status line, not any "400" (a random x-request-id may hold one).
    expect(reply.text).not.toMatch(/HTTP\/1\.1 400/);
    const forwarded = upstream.received.slice(before).map((r) => r.url);
    expect(forwarded).toEqual(["/closing"]);
  });

  it("a well-formed request is still served afterwards", async () => {
    expect((await send(gw.url, { path: "/ok" })).status).toBe(200);
  });
});

describe("max_body", () => {
  it("an announced body over the cap is a 413 that costs no limit", async () => {
    const before = upstream.received.length;
    const big = await send(gw.url, { method: "POST", path: "/upload", body: "x".repeat(2000) });
    expect(big.status).toBe(413);
    expect(big.json<{ detail: string }>().detail).toContain("1024 bytes");
    expect(upstream.received.length).toBe(before);
    const ok = await send(gw.url, { method: "POST", path: "/upload", body: "x".repeat(1000) });
    expect(ok.status).toBe(200);
    expect(upstream.received.at(-1)!.body).toHaveLength(1000);
    // The 413 took nothing: burst 5, one used.
    expect(ok.headers.ratelimit).toContain('"anonymous.upload";r=4');
  });

  it("a streamed (chunked) body is cut off at the cap with a 413", async () => {
    const before = upstream.received.length;
    const chunk = (s: string) => `${s.length.toString(16)}\r\n${s}\r\n`;
    const reply = await rawRequest(
      gw.url,
      head(["POST /upload HTTP/1.1", "Host: x", "Transfer-Encoding: chunked", "Connection: close"]) +
        chunk("a".repeat(800)) +
        chunk("b".repeat(800)) +
        "0\r\n\r\n",
    );
    expect(reply.status).toBe(413);
    expect(reply.text).toContain("max_body");
    // Whatever the upstream saw, it never saw a complete request.
    expect(upstream.received.length).toBe(before);
  });
});
