// fetchWithRetry in virtual time: it waits what the server says (Retry-After in seconds or as a
// date, or the RateLimit headers), backs off with jitter otherwise, retries only what is safe to
// repeat, stops on abort, and never runs past its time budget. The server is a fetch that answers
// from a script, and vitest's fake timers stand in for the clock and the waits, so every wait is
// measured exactly and none is slept.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { backoffDelayMs, fetchWithRetry, serverDelayMs } from "../../src/client/index.js";

// A whole second, so that an HTTP date (whole seconds) says exactly what the test means.
const T0 = Date.UTC(2026, 0, 1);

beforeEach(() => {
  vi.useFakeTimers({ now: T0 });
});
afterEach(() => {
  vi.useRealTimers();
});

type Answer = (n: number) => Response;
interface Hit {
  at: number;
  method: string;
}

/** A fetch that answers the n-th request (from 1) with `answer(n)`, and records when and how. */
function server(answer: Answer): { fetch: typeof fetch; hits: Hit[] } {
  const hits: Hit[] = [];
  const fetch = (async (_input, init) => {
    hits.push({ at: Date.now(), method: init?.method ?? "GET" });
    return answer(hits.length);
  }) as typeof globalThis.fetch;
  return { fetch, hits };
}

const limitedThenOk =
  (headers: Record<string, string>, status = 429): Answer =>
  (n) =>
    n === 1 ? new Response("slow down", { status, headers }) : new Response("ok", { status: 200 });

/**
 * Moves virtual time on by exactly `virtualMs`, the waits `call` is expected to make in all, and
 * settles with its result; a call still waiting then fails the test at once. Not
 * vi.runAllTimersAsync(): that runs whatever timer is in the fake clock until none is left, and a
 * timer that re-arms itself (a poll another file left running, whose next turn was scheduled
 * while this file's fake timers were installed) never leaves: it ran 10 000 times and aborted.
 * A fixed advance runs such a timer a bounded number of times, and states how long each test
 * waits.
 */
async function settled<T>(call: Promise<T>, virtualMs: number): Promise<T> {
  let done = false;
  call.then(
    () => {
      done = true;
    },
    () => {
      done = true; // the rejection is observed by the caller's await
    },
  );
  await vi.advanceTimersByTimeAsync(virtualMs);
  if (!done) throw new Error(`fetchWithRetry still waiting after ${virtualMs} ms of virtual time`);
  return call;
}

const waits = (hits: Hit[]) => hits.slice(1).map((hit, i) => hit.at - hits[i]!.at);

describe("fetchWithRetry", () => {
  it("429 with Retry-After: 1, then 200: one retry after a second", async () => {
    const s = server(limitedThenOk({ "retry-after": "1" }));
    const r = await settled(fetchWithRetry("http://api/a", {}, { fetch: s.fetch }), 1000);
    expect(r.status).toBe(200);
    expect(await r.text()).toBe("ok");
    expect(waits(s.hits)).toEqual([1000]);
  });

  it("Retry-After as an HTTP date", async () => {
    const at = new Date(Date.now() + 2000).toUTCString();
    const s = server(limitedThenOk({ "retry-after": at }, 503));
    const r = await settled(fetchWithRetry("http://api/b", {}, { fetch: s.fetch }), 2000);
    expect(r.status).toBe(200);
    expect(waits(s.hits)).toEqual([2000]);
  });

  it("only the RateLimit headers: waits for the exhausted limit's reset", async () => {
    const s = server(limitedThenOk({ ratelimit: '"free.global";r=0;t=1, "free.tenant";r=40;t=9' }));
    const r = await settled(fetchWithRetry("http://api/c", {}, { fetch: s.fetch }), 1000);
    expect(r.status).toBe(200);
    expect(waits(s.hits)).toEqual([1000]);
    // The draft headers alone say the same.
    expect(serverDelayMs(new Headers({ "ratelimit-remaining": "0", "ratelimit-reset": "3" }))).toBe(3000);
    expect(
      serverDelayMs(new Headers({ "ratelimit-remaining": "2", "ratelimit-reset": "3" })),
    ).toBeUndefined();
  });

  it("a POST is not retried unless allowed", async () => {
    const once = server(limitedThenOk({ "retry-after": "0" }));
    const r1 = await settled(
      fetchWithRetry("http://api/d", { method: "POST", body: "x" }, { fetch: once.fetch }),
      0,
    );
    expect(r1.status).toBe(429);
    expect(once.hits).toHaveLength(1);
    const twice = server(limitedThenOk({ "retry-after": "0" }));
    const r2 = await settled(
      fetchWithRetry(
        "http://api/d",
        { method: "POST", body: "x" },
        { fetch: twice.fetch, retryNonIdempotent: true },
      ),
      100,
    );
    expect(r2.status).toBe(200);
    expect(twice.hits.map((h) => h.method)).toEqual(["POST", "POST"]);
    expect(waits(twice.hits)).toEqual([100]); // "0" still waits the floor, minDelayMs
  });

  it("an abort stops the wait at once", async () => {
    const s = server(() => new Response(null, { status: 429, headers: { "retry-after": "5" } }));
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error("caller gave up")), 150);
    await expect(
      settled(fetchWithRetry("http://api/e", { signal: controller.signal }, { fetch: s.fetch }), 150),
    ).rejects.toThrow("caller gave up");
    expect(Date.now() - T0).toBe(150);
    expect(vi.getTimerCount()).toBe(0); // the 5 s wait was cancelled, not left to run
    expect(s.hits).toHaveLength(1);
  });

  it("total time is bounded: it returns the last answer rather than wait past maxElapsedMs", async () => {
    const s = server(() => new Response(null, { status: 503, headers: { "retry-after": "1" } }));
    const r = await settled(
      fetchWithRetry("http://api/f", {}, { fetch: s.fetch, maxElapsedMs: 2500, maxAttempts: 10 }),
      2000,
    );
    expect(r.status).toBe(503);
    // At 0, 1 s and 2 s; a third wait would end past 2.5 s.
    expect(s.hits.map((h) => h.at - T0)).toEqual([0, 1000, 2000]);
    expect(Date.now() - T0).toBe(2000);
  });

  it("attempts are bounded, and without hints it backs off with full jitter, never in a tight loop", async () => {
    const s = server(() => new Response(null, { status: 503 }));
    const delays: number[] = [];
    const r = await settled(
      fetchWithRetry(
        "http://api/g",
        {},
        {
          fetch: s.fetch,
          maxAttempts: 4,
          baseDelayMs: 100,
          random: () => 0.999,
          onRetry: (i) => delays.push(Math.round(i.delayMs)),
        },
      ),
      100 + 199 + 399,
    );
    expect(r.status).toBe(503);
    expect(s.hits).toHaveLength(4);
    expect(delays).toEqual([100, 200, 400]);
    // Each wait as long as announced (timers count whole milliseconds: 199.8 waits 199).
    expect(waits(s.hits)).toEqual([100, 199, 399]);
    // With no jitter drawn at all the floor still holds.
    const floored = server(() => new Response(null, { status: 503 }));
    const floors: number[] = [];
    await settled(
      fetchWithRetry(
        "http://api/g",
        {},
        { fetch: floored.fetch, maxAttempts: 3, random: () => 0, onRetry: (i) => floors.push(i.delayMs) },
      ),
      100 + 100,
    );
    expect(floors).toEqual([100, 100]);
    expect(backoffDelayMs(10, 500, 30_000, () => 1)).toBe(30_000);
  });

  it("a hint longer than maxDelayMs ends the retries with the server's answer", async () => {
    const s = server(() => new Response(null, { status: 429, headers: { "retry-after": "3600" } }));
    const r = await settled(fetchWithRetry("http://api/h", {}, { fetch: s.fetch }), 0);
    expect(r.status).toBe(429);
    expect(s.hits).toHaveLength(1);
    expect(Date.now()).toBe(T0);
  });

  it("network errors are retried for idempotent methods, then thrown", async () => {
    let calls = 0;
    const failing = (async () => {
      calls++;
      throw new TypeError("fetch failed");
    }) as typeof fetch;
    await expect(
      // Jitter of at most 10 and 20 ms, under the 100 ms floor: two waits of 100 ms.
      settled(fetchWithRetry("http://api/i", {}, { fetch: failing, maxAttempts: 3, baseDelayMs: 10 }), 200),
    ).rejects.toThrow("fetch failed");
    expect(calls).toBe(3);
  });
});
