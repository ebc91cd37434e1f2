// Issue 16: a route's timeout is a deadline for the whole upstream exchange (undici's timeouts
// are idle timeouts: a byte every few seconds never timed out), a route's timeout and
// connect_timeout apply to that route only, and the answer names the route and the deadline.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import { formatProblem } from "../../src/config/problems.js";
import {
  ConnectWaitError,
  startExchangeDeadline,
  UpstreamDeadlineError,
} from "../../src/proxy/exchange-deadline.js";
import { classifyUpstreamError, upstreamProblem } from "../../src/proxy/stream.js";

/** Runs the timers up to `ms` from now, and the two setImmediate turns a deadline waits for. */
async function advance(ms: number) {
  await vi.advanceTimersByTimeAsync(ms);
}

describe("startExchangeDeadline", () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it("fires once at the deadline, however the exchange goes meanwhile", async () => {
    const fired: Error[] = [];
    startExchangeDeadline({ timeoutMs: 1000, connectWaitMs: undefined }, (e) => fired.push(e));
    await advance(999);
    expect(fired).toEqual([]);
    await advance(5);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeInstanceOf(UpstreamDeadlineError);
    expect(fired[0]).toMatchObject({ ms: 1000, code: "TOLLGATE_UPSTREAM_DEADLINE" });
    await advance(10_000);
    expect(fired).toHaveLength(1);
  });

  it("never fires once cleared, nor with a timeout of 0", async () => {
    const fired: Error[] = [];
    startExchangeDeadline({ timeoutMs: 1000, connectWaitMs: 500 }, (e) => fired.push(e)).clear();
    startExchangeDeadline({ timeoutMs: 0, connectWaitMs: undefined }, (e) => fired.push(e));
    await advance(60_000);
    expect(fired).toEqual([]);
  });

  it("a cleared deadline whose timer already ran does not fire in the turns after it", async () => {
    const fired: Error[] = [];
    const d = startExchangeDeadline({ timeoutMs: 100, connectWaitMs: undefined }, (e) => fired.push(e));
    // The timer ran; the decision waits two setImmediate turns (deadline.ts) and meanwhile the
    // response ended in time.
    vi.advanceTimersToNextTimer();
    d.clear();
    await advance(10);
    expect(fired).toEqual([]);
  });

  it("the connect wait fires unless the request got its connection first", async () => {
    const fired: Error[] = [];
    startExchangeDeadline({ timeoutMs: 5000, connectWaitMs: 300 }, (e) => fired.push(e));
    await advance(305);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeInstanceOf(ConnectWaitError);
    // The exchange failed: the deadline does not fire on top.
    await advance(10_000);
    expect(fired).toHaveLength(1);

    const later: Error[] = [];
    const d = startExchangeDeadline({ timeoutMs: 5000, connectWaitMs: 300 }, (e) => later.push(e));
    await advance(100);
    d.connected();
    await advance(1000);
    expect(later).toEqual([]);
    await advance(4000);
    expect(later.map((e) => e.constructor)).toEqual([UpstreamDeadlineError]);
  });

  it("a connection given in the turns between the wait's timer and its decision wins", async () => {
    const fired: Error[] = [];
    const d = startExchangeDeadline({ timeoutMs: 5000, connectWaitMs: 300 }, (e) => fired.push(e));
    vi.advanceTimersToNextTimer();
    d.connected();
    await advance(10);
    expect(fired).toEqual([]);
  });
});

describe("failures of the deadline", () => {
  it("are classified as the timeouts they are", () => {
    expect(classifyUpstreamError(new UpstreamDeadlineError(1000))).toBe("timeout");
    expect(classifyUpstreamError(new ConnectWaitError(200))).toBe("connect_timeout");
  });

  it("answer naming the upstream, the route and the deadline that applied", () => {
    const rt = runtime(`
upstreams:
  api: { url: http://127.0.0.1:3000, timeout: 30s, connect_timeout: 2s }
routes:
  - { name: reports, match: { path: /reports }, upstream: api, timeout: 1s, connect_timeout: 250ms }
`);
    const route = rt.routeList[0]!;
    expect(upstreamProblem("timeout", route.upstream, route)).toMatchObject({
      status: 504,
      type: "https://tollgate.dev/problems/upstream-timeout",
      detail: 'upstream "api" did not answer within 1000 ms, the timeout of route "reports"',
    });
    expect(upstreamProblem("connect_timeout", route.upstream, route).detail).toBe(
      'no connection to upstream "api" within 250 ms, the connect_timeout of route "reports"',
    );
  });
});

function runtime(body: string): Runtime {
  const r = loadConfigText(`store: { url: "memory://" }\n${body}`, "gw.yaml", {});
  if (!r.ok) throw new Error(r.problems.map(formatProblem).join("\n"));
  return compileRuntime(r.config, { file: "gw.yaml", version: "1" });
}

describe("route timeouts, compiled", () => {
  it("a route's timeout and connect_timeout are its own; the others keep the upstream's", () => {
    const rt = runtime(`
upstreams:
  api: { url: http://127.0.0.1:3000, timeout: 5s, connect_timeout: 2s }
  short: http://127.0.0.1:3001
routes:
  - { name: slow, match: { path: /slow }, upstream: api, timeout: 1s }
  - { name: quick, match: { path: /quick }, upstream: api, connect_timeout: 200ms }
  - { name: rest, match: { path: /rest }, upstream: api }
  - { name: other, match: { path: /other }, upstream: short }
`);
    const [slow, quick, rest, other] = rt.routeList;
    expect(slow).toMatchObject({ timeoutMs: 1000, connectTimeoutMs: 2000, connectWaitMs: undefined });
    // Shorter than the pool's: timed per request.
    expect(quick).toMatchObject({ timeoutMs: 5000, connectTimeoutMs: 200, connectWaitMs: 200 });
    expect(rest).toMatchObject({ timeoutMs: 5000, connectTimeoutMs: 2000, connectWaitMs: undefined });
    expect(other).toMatchObject({ timeoutMs: 30_000, connectTimeoutMs: 2000, connectWaitMs: undefined });
    expect(slow!.upstream.connectTimeoutMs).toBe(2000);
  });

  it("the pool allows the longest connect timeout of its routes; shorter ones are timed per request", () => {
    const rt = runtime(`
upstreams:
  api: { url: http://127.0.0.1:3000, connect_timeout: 2s }
routes:
  - { name: patient, match: { path: /patient }, upstream: api, connect_timeout: 10s }
  - { name: rest, match: { path: /rest }, upstream: api }
`);
    const [patient, rest] = rt.routeList;
    expect(rt.upstreams.get("api")!.connectTimeoutMs).toBe(10_000);
    expect(patient).toMatchObject({ connectTimeoutMs: 10_000, connectWaitMs: undefined });
    expect(rest).toMatchObject({ connectTimeoutMs: 2000, connectWaitMs: 2000 });
  });

  it("0 is no connect timeout: the pool's becomes none, and other routes keep theirs per request", () => {
    const rt = runtime(`
upstreams:
  api: { url: http://127.0.0.1:3000, connect_timeout: 2s }
routes:
  - { name: forever, match: { path: /forever }, upstream: api, connect_timeout: 0s, timeout: 0s }
  - { name: rest, match: { path: /rest }, upstream: api }
`);
    const [forever, rest] = rt.routeList;
    expect(rt.upstreams.get("api")!.connectTimeoutMs).toBe(0);
    expect(forever).toMatchObject({ timeoutMs: 0, connectTimeoutMs: 0, connectWaitMs: undefined });
    expect(rest).toMatchObject({ connectWaitMs: 2000 });
  });
});
