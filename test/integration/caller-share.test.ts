// One caller cannot hold an upstream's whole pool: requests it has in flight past its
// `caller_share` of the upstream's connections are refused (429) before any limit is charged, so
// another caller's request still finds a connection. On the previous main, a caller whose
// requests sent their bodies slowly took every pooled connection and the other caller's request
// waited for the route's timeout.
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let upstream: TestUpstream;
let gw: InProcessGateway;
const CONNECTIONS = 8;

beforeAll(async () => {
  upstream = await startUpstream();
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: admin-token }
log: { level: info, requests: false }
store: { url: "memory://" }
upstreams:
  api: { url: ${upstream.url}, connections: ${CONNECTIONS}, timeout: 5s }
clients:
  - { id: holder, key: key-holder, plan: big }
  - { id: other, key: key-other, plan: big }
plans:
  big: { global: { rate: 1000/s, burst: 1000 } }
routes:
  - { name: upload, match: { path: /upload }, upstream: api }
`);
});
afterAll(async () => {
  await gw.stop();
  await upstream.close();
});

/** A POST whose body is announced and never finished: it holds its upstream connection. */
function heldUpload(port: number, key: string): Promise<{ socket: Socket; head: Promise<string> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.write(
        `POST /upload HTTP/1.1\r\nHost: x\r\nx-api-key: ${key}\r\ncontent-length: 100000\r\n\r\n${"x".repeat(10)}`,
      );
      const head = new Promise<string>((r) => {
        let text = "";
        socket.on("data", (d: Buffer) => {
          text += d.toString("latin1");
          if (text.includes("\r\n\r\n")) r(text);
        });
        socket.on("close", () => r(text));
      });
      resolve({ socket, head });
    });
    socket.on("error", reject);
  });
}

const within = <T>(p: Promise<T>, ms: number) =>
  Promise.race([p, new Promise<"pending">((r) => setTimeout(() => r("pending"), ms))]);

describe("caller_share", () => {
  it("refuses a caller's requests past its share of the pool, and another caller's still goes through at once", async () => {
    const port = gw.gateway.proxyAddress!.port;
    const share = Math.floor(CONNECTIONS * 0.25);
    const held = await Promise.all(
      Array.from({ length: CONNECTIONS + 4 }, () => heldUpload(port, "key-holder")),
    );
    try {
      const answers = await Promise.all(held.map((h) => within(h.head, 1500)));
      // All but a share of the pool hold a connection (no answer yet): the rest stays free for
      // others, and every request past that is a 429 at once.
      expect(answers.filter((a) => a === "pending")).toHaveLength(CONNECTIONS - share);
      const refused = answers.filter((a): a is string => a !== "pending");
      expect(refused).toHaveLength(4 + share);
      for (const text of refused) {
        expect(text).toMatch(/^HTTP\/1\.1 429/);
        expect(text).toMatch(/retry-after: 1\r\n/i);
      }
      const started = performance.now();
      const other = await fetch(`${gw.url}/upload`, {
        method: "POST",
        headers: { "x-api-key": "key-other" },
        body: "hello",
      });
      expect(other.status).toBe(200);
      expect(performance.now() - started).toBeLessThan(1000);

      const metrics = await (await fetch(`${gw.adminUrl}/metrics`)).text();
      expect(metrics).toMatch(
        new RegExp(`tollgate_caller_share_refusals_total\\{upstream="api"\\} ${4 + share}`),
      );
    } finally {
      for (const h of held) h.socket.destroy();
    }
  });

  it("gives the share back when the held requests end, however they end", async () => {
    // The client hung up on every held request above: its share is free again.
    // The hang-ups reach the gateway as their sockets close: wait until a request goes through.
    const deadline = performance.now() + 2000;
    for (;;) {
      const probe = await fetch(`${gw.url}/upload`, {
        method: "POST",
        headers: { "x-api-key": "key-holder" },
        body: "x",
      });
      await probe.text();
      if (probe.status === 200) break;
      expect(performance.now()).toBeLessThan(deadline);
      await new Promise((r) => setTimeout(r, 50));
    }
    const share = Math.floor(CONNECTIONS * 0.25);
    for (let round = 0; round < 3; round++) {
      const answers = await Promise.all(
        Array.from({ length: share }, () =>
          fetch(`${gw.url}/upload`, { method: "POST", headers: { "x-api-key": "key-holder" }, body: "x" }),
        ),
      );
      expect(answers.map((a) => a.status)).toEqual(Array(share).fill(200));
    }
  });
});
