// The one GET the gateway makes to an identity provider (identity/idp/fetch-json.ts), against
// real peers that misbehave: each is refused with its reason within the deadline, and no
// socket is left open behind it.

import { getEventListeners } from "node:events";
import { createServer as createHttpServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { createServer as createNetServer, type Server as NetServer, type Socket } from "node:net";
import { afterEach, describe, expect, it } from "vitest";
import { FetchError, fetchJson } from "../../src/identity/idp/fetch-json.js";

const servers: (Server | NetServer)[] = [];
const open = new Set<Socket>();
afterEach(async () => {
  for (const s of open) s.destroy();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function listen<T extends Server | NetServer>(server: T): Promise<URL> {
  servers.push(server);
  server.on("connection", (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`);
}

const failure = async (url: URL, deadlineMs = 500) => {
  const started = performance.now();
  try {
    await fetchJson(url, { deadlineMs, maxBytes: 4096 });
    return { outcome: "ok", message: "", ms: performance.now() - started };
  } catch (err) {
    expect(err).toBeInstanceOf(FetchError);
    const e = err as FetchError;
    return { outcome: e.outcome, message: e.message, ms: performance.now() - started };
  }
};

/** The peer's sockets are all closed a moment after a refusal: the gateway left none open. */
const socketsClosed = async () => {
  for (let i = 0; i < 40 && open.size > 0; i++) await new Promise((r) => setTimeout(r, 25));
  return open.size;
};

describe("fetchJson against a misbehaving identity provider", () => {
  it("a peer that accepts and never answers: the deadline, socket closed", async () => {
    // resume(): a paused socket never reads the FIN, and would look open forever.
    const url = await listen(createNetServer((s) => s.resume()));
    const r = await failure(url, 300);
    expect(r).toMatchObject({ outcome: "timeout", message: "no complete answer within 300 ms" });
    expect(r.ms).toBeLessThan(1000);
    expect(await socketsClosed()).toBe(0);
  });

  it("a peer that drips its body: the one deadline covers the whole answer", async () => {
    const url = await listen(
      createHttpServer((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" });
        res.write('{"keys": [');
        const drip = setInterval(() => res.write(" "), 50);
        res.on("close", () => clearInterval(drip));
      }),
    );
    const r = await failure(url, 400);
    expect(r).toMatchObject({ outcome: "timeout", message: "no complete answer within 400 ms" });
    expect(await socketsClosed()).toBe(0);
  });

  it("an answer past the size cap, declared or streamed", async () => {
    const declared = await listen(
      createHttpServer((_req, res) => {
        res.writeHead(200, { "content-length": "1000000" });
        res.write("{");
      }),
    );
    expect(await failure(declared)).toMatchObject({
      outcome: "too_large",
      message: "the answer is 1000000 bytes, more than 4096",
    });
    const streamed = await listen(
      createHttpServer((_req, res) => {
        res.writeHead(200);
        res.end(`{"keys": "${"x".repeat(10_000)}"}`);
      }),
    );
    expect(await failure(streamed)).toMatchObject({
      outcome: "too_large",
      message: "the answer is more than 4096 bytes",
    });
    expect(await socketsClosed()).toBe(0);
  });

  it("a redirect is not followed, another status is refused, and a body that is not JSON", async () => {
    const redirect = await listen(
      createHttpServer((_req, res) => res.writeHead(302, { location: "https://elsewhere.test/keys" }).end()),
    );
    expect(await failure(redirect)).toMatchObject({
      outcome: "status",
      message:
        "answered 302 to https://elsewhere.test/keys (redirects are not followed: configure the final URL), not 200",
    });
    const html = await listen(createHttpServer((_req, res) => res.writeHead(200).end("<html>login</html>")));
    expect(await failure(html)).toMatchObject({ outcome: "invalid", message: "the answer is not JSON" });
    const refused = new URL(redirect.href);
    await new Promise((r) => servers.splice(0, 1)[0]!.close(r));
    expect(await failure(refused)).toMatchObject({ outcome: "network" });
  });

  it("plain http off the machine is refused before any connection", async () => {
    expect(await failure(new URL("http://idp.example.com/jwks"))).toMatchObject({
      outcome: "invalid",
      message: expect.stringMatching(/^http:\/\/ is accepted only on a loopback address/),
    });
  });
});

describe("fetchJson stopped", () => {
  it("an abort ends a fetch in flight at once and closes its socket", async () => {
    const url = await listen(createNetServer((s) => s.resume()));
    const abort = new AbortController();
    const started = performance.now();
    const fetching = fetchJson(url, { deadlineMs: 5000, signal: abort.signal });
    setTimeout(() => abort.abort(), 50);
    await expect(fetching).rejects.toMatchObject({ outcome: "network", message: "the fetch was stopped" });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(await socketsClosed()).toBe(0);
  });
});

describe("fetchJson with the key set's long-lived signal", () => {
  it("leaves no listener on it once a fetch has settled, answered or failed", async () => {
    const good = await listen(
      createHttpServer((_req, res) =>
        res.writeHead(200, { "content-type": "application/json" }).end('{"keys":[]}'),
      ),
    );
    const bad = await listen(createHttpServer((_req, res) => res.writeHead(503).end()));
    const abort = new AbortController();
    for (let i = 0; i < 5; i++) {
      await fetchJson(good, { deadlineMs: 2000, signal: abort.signal });
      await fetchJson(bad, { deadlineMs: 2000, signal: abort.signal }).catch(() => {});
    }
    // Each listener held its fetch's request and answer for the life of the process.
    expect(getEventListeners(abort.signal, "abort")).toHaveLength(0);
  });
});
