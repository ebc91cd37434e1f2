// Envoy's rate-limit service served by two gateway processes on one real Redis: a grpc-js client
// with Envoy's protos gets exact OVER_LIMIT counts with its requests split across both, and a
// hung Redis (SIGSTOP) or a killed one is answered within the store timeout by each on_failure
// policy.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type GatewayProcess, spawnGateway } from "../support/gateway.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { awayFromWindowEdge, type RlsClient, rlsClient } from "../support/rls.js";

const DESCRIPTORS = `
domain: edge
descriptors:
  - key: remote_address
    rate_limit: { unit: minute, requests_per_unit: 10 }
  - key: path
    value: /free
    rate_limit: { unlimited: true }
`;

const config = (redisUrl: string, descriptors: string, policy: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store:
  url: ${redisUrl}
  timeout: 100ms
  breaker: { error_rate: 50%, min_requests: 1000, window: 2s, cooldown: 1s }
upstreams: { api: { url: "http://127.0.0.1:9" } }
routes:
  - { name: default, match: { path: / }, upstream: api }
rls:
  listen: 127.0.0.1:0
  config: ${descriptors}
  response_headers: true
  on_failure: ${policy}
`;

function rlsAddress(g: GatewayProcess): string {
  const line = g.lines.find((l) => l.msg === "tollgate listening");
  if (typeof line?.rls !== "string") throw new Error("the gateway did not log its rls address");
  return line.rls;
}

const ip = (n: number) => [{ entries: [{ key: "remote_address", value: `10.0.0.${n}` }] }];

describe("rls: two gateways on one Redis", () => {
  let redis: RedisProcess;
  let a: GatewayProcess;
  let b: GatewayProcess;
  let ca: RlsClient;
  let cb: RlsClient;

  beforeAll(async () => {
    redis = await startRedis();
    const file = join(mkdtempSync(join(tmpdir(), "tollgate-rls-")), "descriptors.yaml");
    writeFileSync(file, DESCRIPTORS);
    [a, b] = await Promise.all([
      spawnGateway(config(redis.url, file, "open")),
      spawnGateway(config(redis.url, file, "closed")),
    ]);
    ca = rlsClient(rlsAddress(a));
    cb = rlsClient(rlsAddress(b));
  }, 30_000);

  afterAll(async () => {
    ca?.close();
    cb?.close();
    await Promise.all([a?.stop(), b?.stop()]);
    await redis?.stop();
  });

  it("50 concurrent requests split across both for a 10/minute descriptor: exactly 10 OK", async () => {
    await awayFromWindowEdge(60, 5);
    const replies = await Promise.all(
      Array.from({ length: 50 }, (_, i) => (i % 2 === 0 ? ca : cb).ask("edge", ip(1))),
    );
    const codes = replies.map((r) => r.overall_code);
    expect(codes.filter((c) => c === "OK")).toHaveLength(10);
    expect(codes.filter((c) => c === "OVER_LIMIT")).toHaveLength(40);
    const over = replies.find((r) => r.overall_code === "OVER_LIMIT")!;
    expect(over.statuses[0]).toMatchObject({
      code: "OVER_LIMIT",
      current_limit: { requests_per_unit: 10, unit: "MINUTE" },
      limit_remaining: 0,
    });
    expect(over.statuses[0]!.duration_until_reset!.seconds).toBeGreaterThan(0);
    expect(over.statuses[0]!.duration_until_reset!.seconds).toBeLessThanOrEqual(60);
    expect(Object.fromEntries(over.response_headers_to_add!.map((h) => [h.key, h.value]))).toMatchObject({
      "RateLimit-Limit": "10",
      "RateLimit-Remaining": "0",
    });
    // Another value of the same descriptor key has its own counter; an unlimited one none.
    const other = await cb.ask("edge", [...ip(2), { entries: [{ key: "path", value: "/free" }] }]);
    expect(other.overall_code).toBe("OK");
    expect(other.statuses.map((s) => s.code)).toEqual(["OK", "OK"]);
    expect(other.statuses[0]!.limit_remaining).toBe(9);
    expect(other.statuses[1]!.limit_remaining).toBe(4_294_967_295);
  });

  it("hits_addend is the cost, a descriptor's 0 looks without taking", async () => {
    await awayFromWindowEdge(60, 3);
    const six = await ca.ask("edge", ip(3), 6);
    expect(six.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4 });
    const peek = await cb.ask("edge", [{ ...ip(3)[0]!, hits_addend: { value: 0 } }]);
    expect(peek.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 4 });
    const five = await cb.ask("edge", ip(3), 5);
    expect(five.overall_code).toBe("OVER_LIMIT");
    const four = await ca.ask("edge", ip(3), 4);
    expect(four.statuses[0]).toMatchObject({ code: "OK", limit_remaining: 0 });
    const peekFull = await ca.ask("edge", [{ ...ip(3)[0]!, hits_addend: { value: 0 } }]);
    expect(peekFull.overall_code).toBe("OVER_LIMIT");
  });

  it("a hung Redis (SIGSTOP) is answered within the store timeout: open OK, closed OVER_LIMIT", async () => {
    redis.pause();
    try {
      const started = Date.now();
      const [open, closed] = await Promise.all([ca.ask("edge", ip(9)), cb.ask("edge", ip(9))]);
      const ms = Date.now() - started;
      expect(open.overall_code).toBe("OK");
      expect(closed.overall_code).toBe("OVER_LIMIT");
      expect(closed.statuses[0]).toMatchObject({
        code: "OVER_LIMIT",
        current_limit: { requests_per_unit: 10 },
      });
      // store.timeout is 100ms; the bound leaves room for a loaded machine.
      expect(ms).toBeLessThan(1000);
      // A descriptor without a limit needs no store: OK whatever the policy.
      const free = await cb.ask("edge", [{ entries: [{ key: "path", value: "/free" }] }]);
      expect(free.overall_code).toBe("OK");
    } finally {
      redis.resume();
    }
  });

  it("a killed Redis too; once it is back, the store decides again", async () => {
    await redis.kill();
    try {
      const started = Date.now();
      const [open, closed] = await Promise.all([ca.ask("edge", ip(10)), cb.ask("edge", ip(10))]);
      expect(Date.now() - started).toBeLessThan(1000);
      expect([open.overall_code, closed.overall_code]).toEqual(["OK", "OVER_LIMIT"]);
    } finally {
      await redis.restart();
    }
    // Decided by the store again: a fresh descriptor counts down (a degraded answer says 0 left).
    const deadline = Date.now() + 10_000;
    let remaining = 0;
    while (Date.now() < deadline) {
      remaining = (await cb.ask("edge", ip(11))).statuses[0]!.limit_remaining ?? 0;
      if (remaining > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(remaining).toBeGreaterThan(0);
  });

  it("refuses a malformed request with INVALID_ARGUMENT, and keeps serving", async () => {
    await expect(ca.ask("", ip(1))).rejects.toMatchObject({
      code: 3,
      details: "rate limit domain must not be empty",
    });
    await expect(ca.ask("edge", [])).rejects.toMatchObject({
      code: 3,
      details: "rate limit descriptor list must not be empty",
    });
    const unknown = await ca.ask("nowhere", ip(1));
    expect(unknown.overall_code).toBe("OK");
  });
});
