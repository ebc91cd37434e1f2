// The rate-limit service in-process against a real Redis: envoyproxy/ratelimit's integration
// sequence (test/support/rls-cases.ts) through grpc-js; the rls files reloaded with the config
// (a bad one refused with its position, the previous one serving); the deny cache answering a
// descriptor over its limit; hostile input answered, never crashing the listener.
import { once } from "node:events";
import { writeFileSync } from "node:fs";
import { connect } from "node:http2";
import { dirname, join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Gateway } from "../../src/gateway/gateway.js";
import { createLogger } from "../../src/observability/log.js";
import { type InProcessGateway, LogSink, writeConfig } from "../support/gateway.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { awayFromWindowEdge, type RlsClient, rlsClient } from "../support/rls.js";
import { INTEGRATION_ANOTHER, INTEGRATION_BASIC, integrationSequence } from "../support/rls-cases.js";

const config = (redisUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: false }
store: { url: ${redisUrl}, timeout: 200ms }
upstreams: { api: { url: "http://127.0.0.1:9" } }
routes:
  - { name: default, match: { path: / }, upstream: api }
rls:
  listen: 127.0.0.1:0
  config: [basic.yaml, another.yaml]
`;

describe("rls in-process on a real Redis", () => {
  let redis: RedisProcess;
  let g: InProcessGateway;
  let client: RlsClient;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    // The files sit beside the config (relative paths): written before the gateway reads them.
    const file = writeConfig(config(redis.url));
    dir = dirname(file);
    writeFileSync(join(dir, "basic.yaml"), INTEGRATION_BASIC);
    writeFileSync(join(dir, "another.yaml"), INTEGRATION_ANOTHER);
    g = await startGatewayAt(file);
    client = rlsClient(`127.0.0.1:${g.gateway.rlsPort}`);
  }, 30_000);

  afterAll(async () => {
    client?.close();
    await g?.stop();
    await redis?.stop();
  });

  it("answers envoyproxy/ratelimit's integration sequence", async () => {
    await awayFromWindowEdge(60, 6);
    await integrationSequence(
      (r) => client.ask(r.domain!, r.descriptors as never, r.hits_addend) as never,
      (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      true,
    );
    const metrics = await g.gateway.metrics.registry.getSingleMetricAsString("tollgate_rls_decisions_total");
    expect(metrics).toMatch(
      /tollgate_rls_decisions_total\{code="over_limit",decided_by="(store|deny_cache)"\} \d+/,
    );
    expect(metrics).toMatch(/tollgate_rls_decisions_total\{code="ok",decided_by="store"\} \d+/);
  });

  it("a descriptor named twice in one call is charged twice: once each, as envoyproxy/ratelimit charges", async () => {
    await awayFromWindowEdge(60, 3);
    // key3: 10 per hour. 3 + 3 of 10, then 4 are left (the script read the key once per call and
    // charged 3 for both).
    const twice = [
      { entries: [{ key: "key3", value: "twice" }] },
      { entries: [{ key: "key3", value: "twice" }] },
    ];
    const first = await client.ask("another", twice, 3);
    expect(first.statuses.map((st) => [st.code, st.limit_remaining])).toEqual([
      ["OK", 4],
      ["OK", 4],
    ]);
    // Six copies of 1 against the 4 left: more than fits, so all of it is refused, none taken.
    const six = Array.from({ length: 6 }, () => ({ entries: [{ key: "key3", value: "twice" }] }));
    expect((await client.ask("another", six, 1)).overall_code).toBe("OVER_LIMIT");
    expect((await client.ask("another", twice.slice(0, 1), 4)).statuses[0]).toMatchObject({
      code: "OK",
      limit_remaining: 0,
    });
  });

  it("a descriptor over its limit is then refused by the deny cache, without a store call", async () => {
    await awayFromWindowEdge(60, 3);
    const ask = () => client.ask("basic", [{ entries: [{ key: "one_per_minute", value: "dc" }] }]);
    expect((await ask()).overall_code).toBe("OK");
    expect((await ask()).overall_code).toBe("OVER_LIMIT");
    const before = await redis.client.info("commandstats");
    const calls = (text: string) =>
      [...text.matchAll(/cmdstat_(?:evalsha|fcall|eval):calls=(\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    for (let i = 0; i < 20; i++) expect((await ask()).overall_code).toBe("OVER_LIMIT");
    const after = await redis.client.info("commandstats");
    expect(calls(after) - calls(before)).toBeLessThan(3);
  });

  it("reloads its files with the config; a bad file is refused with its position and the previous one serves", async () => {
    writeFileSync(
      join(dir, "basic.yaml"),
      INTEGRATION_BASIC.replace("requests_per_unit: 50", "requests_per_unit: 7"),
    );
    const ok = await g.gateway.reload("signal");
    expect(ok).toMatchObject({ ok: true, changed: true });
    const r = await client.ask("basic", [{ entries: [{ key: "key1", value: "reloaded" }] }]);
    expect(r.statuses[0]!.current_limit!.requests_per_unit).toBe(7);

    writeFileSync(
      join(dir, "basic.yaml"),
      "domain: basic\ndescriptors:\n  - key: key1\n    rate_limit: { unit: fortnight, requests_per_unit: 1 }\n",
    );
    const refused = await g.gateway.reload("signal");
    expect(refused.ok).toBe(false);
    if (refused.ok) return;
    expect(refused.problems).toEqual([
      expect.objectContaining({
        file: join(dir, "basic.yaml"),
        line: 4,
        column: 25,
        message:
          "invalid rate limit unit 'fortnight': expected one of second, minute, hour, day, week, month, year",
      }),
    ]);
    const still = await client.ask("basic", [{ entries: [{ key: "key1", value: "reloaded2" }] }]);
    expect(still.statuses[0]!.current_limit!.requests_per_unit).toBe(7);
  });

  it("hostile input: huge values, many descriptors, a bad override, an oversized message; the listener keeps serving", async () => {
    const long = "x".repeat(10_000);
    const r = await client.ask("another", [{ entries: [{ key: "key2", value: long }] }]);
    expect(r.statuses[0]!.limit_remaining).toBe(19);
    const keys = await redis.client.keys("*rls*");
    expect(Math.max(...keys.map((k) => k.length))).toBeLessThan(200);
    const many = Array.from({ length: 65 }, () => ({ entries: [{ key: "k", value: "v" }] }));
    await expect(client.ask("another", many)).rejects.toMatchObject({
      code: 3,
      details: "at most 64 descriptors per request",
    });
    await expect(
      client.ask("another", [
        { entries: [{ key: "key2", value: "o" }], limit: { requests_per_unit: 5, unit: "UNKNOWN" } },
      ]),
    ).rejects.toMatchObject({ code: 3 });
    await expect(
      client.ask("another", [{ entries: [{ key: "key2", value: "x".repeat(100_000) }] }]),
    ).rejects.toMatchObject({
      code: 8,
    });
    expect((await client.ask("another", [{ entries: [{ key: "key3", value: "after" }] }])).overall_code).toBe(
      "OK",
    );
  });

  it("streams opened and never finished: the server allows 100 per connection, and keeps serving", async () => {
    const session = connect(`http://127.0.0.1:${g.gateway.rlsPort}`);
    session.on("error", () => {});
    await once(session, "remoteSettings");
    // SETTINGS_MAX_CONCURRENT_STREAMS, enforced by the server's HTTP/2 layer (a client past it
    // gets its stream refused); without it one client held 200,000 on 20 connections.
    expect(session.remoteSettings.maxConcurrentStreams).toBe(100);
    const path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
    const held = Array.from({ length: 100 }, () => {
      const stream = session.request({
        ":method": "POST",
        ":path": path,
        "content-type": "application/grpc",
      });
      stream.on("error", () => {});
      // A gRPC message prefix announcing 60,000 bytes that never come.
      stream.write(Buffer.from([0, 0, 0, 0xea, 0x60]));
      return stream;
    });
    await new Promise((r) => setTimeout(r, 100));
    expect(
      (await client.ask("another", [{ entries: [{ key: "key3", value: "after2" }] }])).overall_code,
    ).toBe("OK");
    for (const stream of held) stream.close();
    session.destroy();
  });
});

async function startGatewayAt(file: string): Promise<InProcessGateway> {
  const logs = new LogSink();
  const gateway = await Gateway.start({
    configFile: file,
    env: process.env,
    logger: createLogger("info", logs),
    watch: false,
  });
  return {
    gateway,
    url: `http://127.0.0.1:${gateway.proxyAddress!.port}`,
    adminUrl: `http://127.0.0.1:${gateway.adminAddress!.port}`,
    logs,
    configFile: file,
    stop: () => gateway.stop(1000).then(() => undefined),
  };
}
