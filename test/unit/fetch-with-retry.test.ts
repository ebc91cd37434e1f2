// fetchWithRetry against a real local server: it waits what the server says (Retry-After in
// seconds or as a date, or the RateLimit headers), backs off with jitter otherwise, retries only
// what is safe to repeat, stops on abort, and never runs past its time budget.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { backoffDelayMs, fetchWithRetry, serverDelayMs } from "../../src/client/index.js";

type Handler = (req: IncomingMessage, res: ServerResponse, n: number) => void;
let server: Server;
let base: string;
let handler: Handler;
let hits: { at: number; method: string }[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    hits.push({ at: performance.now(), method: req.method ?? "" });
    req.resume();
    handler(req, res, hits.length);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const reset = (h: Handler) => {
  hits = [];
  handler = h;
};
const limitedThenOk =
  (headers: Record<string, string>, status = 429): Handler =>
  (_req, res, n) => {
    if (n === 1) res.writeHead(status, headers).end("slow down");
    else res.writeHead(200).end("ok");
  };

describe("fetchWithRetry", () => {
  it("429 with Retry-After: 1, then 200: one retry after about a second", async () => {
    reset(limitedThenOk({ "retry-after": "1" }));
    const r = await fetchWithRetry(`${base}/a`);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("ok");
    expect(hits).toHaveLength(2);
    const waited = hits[1]!.at - hits[0]!.at;
    expect(waited).toBeGreaterThan(950);
    expect(waited).toBeLessThan(1600);
  });

  it("Retry-After as an HTTP date", async () => {
    const at = new Date(Date.now() + 2000).toUTCString(); // whole seconds: waits 1–2 s
    reset(limitedThenOk({ "retry-after": at }, 503));
    const r = await fetchWithRetry(`${base}/b`);
    expect(r.status).toBe(200);
    const waited = hits[1]!.at - hits[0]!.at;
    expect(waited).toBeGreaterThan(900);
    expect(waited).toBeLessThan(2600);
  });

  it("only the RateLimit headers: waits for the exhausted limit's reset", async () => {
    reset(limitedThenOk({ ratelimit: '"free.global";r=0;t=1, "free.tenant";r=40;t=9' }));
    const r = await fetchWithRetry(`${base}/c`);
    expect(r.status).toBe(200);
    const waited = hits[1]!.at - hits[0]!.at;
    expect(waited).toBeGreaterThan(950);
    expect(waited).toBeLessThan(1600);
    // The draft headers alone say the same.
    expect(serverDelayMs(new Headers({ "ratelimit-remaining": "0", "ratelimit-reset": "3" }))).toBe(3000);
    expect(
      serverDelayMs(new Headers({ "ratelimit-remaining": "2", "ratelimit-reset": "3" })),
    ).toBeUndefined();
  });

  it("a POST is not retried unless allowed", async () => {
    reset(limitedThenOk({ "retry-after": "0" }));
    const once = await fetchWithRetry(`${base}/d`, { method: "POST", body: "x" });
    expect(once.status).toBe(429);
    expect(hits).toHaveLength(1);
    reset(limitedThenOk({ "retry-after": "0" }));
    const twice = await fetchWithRetry(
      `${base}/d`,
      { method: "POST", body: "x" },
      { retryNonIdempotent: true },
    );
    expect(twice.status).toBe(200);
    expect(hits.map((h) => h.method)).toEqual(["POST", "POST"]);
  });

  it("an abort stops the wait at once", async () => {
    reset((_req, res) => res.writeHead(429, { "retry-after": "5" }).end());
    const controller = new AbortController();
    const started = performance.now();
    setTimeout(() => controller.abort(new Error("caller gave up")), 150);
    await expect(fetchWithRetry(`${base}/e`, { signal: controller.signal })).rejects.toThrow(
      "caller gave up",
    );
    expect(performance.now() - started).toBeLessThan(1000);
    expect(hits).toHaveLength(1);
  });

  it("total time is bounded: it returns the last answer rather than wait past maxElapsedMs", async () => {
    reset((_req, res) => res.writeHead(503, { "retry-after": "1" }).end());
    const started = performance.now();
    const r = await fetchWithRetry(`${base}/f`, {}, { maxElapsedMs: 2500, maxAttempts: 10 });
    const took = performance.now() - started;
    expect(r.status).toBe(503);
    expect(hits.length).toBe(3); // at 0, ~1 s, ~2 s; a third wait would end past 2.5 s
    expect(took).toBeLessThan(2800);
  });

  it("attempts are bounded, and without hints it backs off with full jitter, never in a tight loop", async () => {
    reset((_req, res) => res.writeHead(503).end());
    const delays: number[] = [];
    const r = await fetchWithRetry(
      `${base}/g`,
      {},
      {
        maxAttempts: 4,
        baseDelayMs: 100,
        random: () => 0.999,
        onRetry: (i) => delays.push(Math.round(i.delayMs)),
      },
    );
    expect(r.status).toBe(503);
    expect(hits).toHaveLength(4);
    expect(delays).toEqual([100, 200, 400]);
    // With no jitter drawn at all the floor still holds.
    reset((_req, res) => res.writeHead(503).end());
    const floors: number[] = [];
    await fetchWithRetry(
      `${base}/g`,
      {},
      { maxAttempts: 3, random: () => 0, onRetry: (i) => floors.push(i.delayMs) },
    );
    expect(floors).toEqual([100, 100]);
    expect(backoffDelayMs(10, 500, 30_000, () => 1)).toBe(30_000);
  });

  it("a hint longer than maxDelayMs ends the retries with the server's answer", async () => {
    reset((_req, res) => res.writeHead(429, { "retry-after": "3600" }).end());
    const r = await fetchWithRetry(`${base}/h`);
    expect(r.status).toBe(429);
    expect(hits).toHaveLength(1);
  });

  it("network errors are retried for idempotent methods, then thrown", async () => {
    let calls = 0;
    const failing = (async () => {
      calls++;
      throw new TypeError("fetch failed");
    }) as typeof fetch;
    await expect(
      fetchWithRetry("http://127.0.0.1:1/", {}, { fetch: failing, maxAttempts: 3, baseDelayMs: 10 }),
    ).rejects.toThrow("fetch failed");
    expect(calls).toBe(3);
  });
});

describe("the package entry", () => {
  it('is importable as "tollgate/client" (dist, built by the test setup)', async () => {
    const client = await import("tollgate/client");
    expect(typeof client.fetchWithRetry).toBe("function");
    const root = await import("tollgate");
    expect(typeof root.createLimiter).toBe("function");
  });
});
