// Caller identity through a real gateway and Redis: which key a request is limited under.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let redis: RedisProcess;
let upstream: TestUpstream;

const config = (redisUrl: string, upstreamUrl: string, header: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: warn }
store: { url: ${redisUrl}, prefix: "${header}:" }
upstreams: { api: ${upstreamUrl} }
identity:
  trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]
  client_ip_header: ${header}
clients:
  - { id: a1, key: a1-key, plan: team, tenant: acme }
  - { id: a2, key: a2-key, plan: team, tenant: acme }
  - { id: b1, key: b1-key, plan: team, tenant: bravo }
plans:
  anonymous: { global: { rate: 1/m, burst: 2 } }
  team:
    global: { rate: 1/m, burst: 100 }
    routes:
      shared: { rate: 1/m, burst: 3 }
routes:
  - { name: shared, match: { path: /shared }, upstream: api, by: tenant }
  - { name: default, match: { path: / }, upstream: api }
deny: { ips: [198.51.100.0/24] }
exempt: { ips: [203.0.113.200/32] }
`;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
});
afterAll(async () => {
  await upstream.close();
  await redis.stop();
});

describe("X-Forwarded-For from a trusted proxy", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config(redis.url, upstream.url, "x-forwarded-for"));
  });
  afterAll(async () => {
    await gw.stop();
  });

  it("joins every field line and walks from the right past trusted hops", async () => {
    // Two field lines: the client forged 1.1.1.1, our proxies appended the real address.
    const headers = { "x-forwarded-for": ["1.1.1.1", "203.0.113.5, 10.0.0.9"] };
    const replies = [];
    for (let i = 0; i < 3; i++) replies.push(await send(gw.url, { path: "/x", headers }));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429]);
    expect(await redis.client.exists("x-forwarded-for:{ip:203.0.113.5}:anonymous.global")).toBe(1);
    // The upstream sees the chain extended with our peer.
    expect(upstream.received.at(-1)!.headers["x-forwarded-for"]).toBe(
      "1.1.1.1, 203.0.113.5, 10.0.0.9, 127.0.0.1",
    );
    // Changing the forged part changes nothing.
    const forged = await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "9.9.9.9, 203.0.113.5" } });
    expect(forged.status).toBe(429);
  });

  it("groups IPv6 callers by /64", async () => {
    const a = await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "2001:db8:1:2::1" } });
    const b = await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "2001:db8:1:2:ffff::9" } });
    const c = await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "[2001:db8:1:2::77]:443" } });
    expect([a.status, b.status, c.status]).toEqual([200, 200, 429]);
    expect(await redis.client.exists("x-forwarded-for:{ip:2001:db8:1:2::/64}:anonymous.global")).toBe(1);
  });

  it("applies IP deny and exempt lists to the resolved caller", async () => {
    expect((await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "198.51.100.7" } })).status).toBe(
      403,
    );
    for (let i = 0; i < 5; i++) {
      expect(
        (await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "203.0.113.200" } })).status,
      ).toBe(200);
    }
  });

  it("shares a by: tenant route limit among a tenant's clients only", async () => {
    const statuses = [];
    for (const key of ["a1-key", "a2-key", "a1-key", "a2-key"]) {
      statuses.push((await send(gw.url, { path: "/shared", headers: { "x-api-key": key } })).status);
    }
    expect(statuses).toEqual([200, 200, 200, 429]);
    expect((await send(gw.url, { path: "/shared", headers: { "x-api-key": "b1-key" } })).status).toBe(200);
    expect(await redis.client.exists("x-forwarded-for:{t:acme}:team.shared")).toBe(1);
    expect(await redis.client.exists("x-forwarded-for:{t:acme}:c:a1:team.global")).toBe(1);
  });
});

describe("Forwarded from a trusted proxy", () => {
  let gw: InProcessGateway;
  beforeAll(async () => {
    gw = await startGateway(config(redis.url, upstream.url, "forwarded"));
  });
  afterAll(async () => {
    await gw.stop();
  });

  it("reads for= from the right, quoted IPv6 with a port included", async () => {
    const headers = { forwarded: 'for=1.1.1.1, for="[2001:db8:cafe::17]:4711";proto=https, for=10.0.0.3' };
    expect((await send(gw.url, { path: "/x", headers })).status).toBe(200);
    expect(await redis.client.exists("forwarded:{ip:2001:db8:cafe::/64}:anonymous.global")).toBe(1);
  });

  it("ignores X-Forwarded-For when Forwarded is the configured header", async () => {
    expect((await send(gw.url, { path: "/x", headers: { "x-forwarded-for": "203.0.113.77" } })).status).toBe(
      200,
    );
    expect(await redis.client.exists("forwarded:{ip:203.0.113.77}:anonymous.global")).toBe(0);
    expect(await redis.client.exists("forwarded:{ip:127.0.0.1}:anonymous.global")).toBe(1);
  });
});
