// Issue 35, item 1: a flood of bad credentials from one address (a NAT, a corporate proxy, a
// load balancer not in trusted_proxies) must not lock out the good keys of that address. Two
// instances on one Redis, a key from the YAML and a key issued at runtime, each served once
// before 2,000 requests with random unknown keys from the same address: afterwards both are
// still served on both instances, while unknown keys are refused unread (no lookup in Redis).
import { randomBytes } from "node:crypto";
import { Agent } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, metricValue, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "shared-address-admin";
const YAML_KEY = "yaml-key-0123456789abcdef0123456789";

let redis: RedisProcess;
let upstream: TestUpstream;
let a: InProcessGateway;
let b: InProcessGateway;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  const yaml = `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: warn }
store: { url: ${redis.url} }
upstreams: { api: ${upstream.url} }
identity: { auth_failures: { limit: 20, window: 1m } }
clients:
  - { id: yaml-client, key: ${YAML_KEY}, plan: p }
plans:
  p: { global: { rate: 1000/s, burst: 1000 } }
routes:
  - { name: all, match: { path: / }, upstream: api }
`;
  [a, b] = await Promise.all([startGateway(yaml), startGateway(yaml)]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await upstream?.close();
  await redis?.stop();
});

const get = (gw: InProcessGateway, key: string, agent?: Agent) =>
  send(gw.url, { path: "/v1", headers: { "x-api-key": key }, agent }).then((r) => r.status);

describe("a flood of bad keys from a shared address", () => {
  it("leaves the address's known keys served on every instance, and refuses unknown ones unread", async () => {
    const issued = await send(a.adminUrl, {
      method: "POST",
      path: "/admin/keys",
      headers: { authorization: `Bearer ${TOKEN}`, "content-type": "application/json" },
      body: JSON.stringify({ client: "runtime-client", plan: "p" }),
    });
    expect(issued.status).toBe(201);
    const runtimeKey = issued.json<{ key: string }>().key;
    for (const gw of [a, b]) {
      expect(await get(gw, YAML_KEY)).toBe(200);
      expect(await get(gw, runtimeKey)).toBe(200);
    }
    const lookups = async () =>
      (await metricValue(a.adminUrl, /^tollgate_key_lookups_total\{result="unknown"\} (\d+)/m)) +
      (await metricValue(b.adminUrl, /^tollgate_key_lookups_total\{result="unknown"\} (\d+)/m));
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    const statuses = new Map<number, number>();
    for (let i = 0; i < 2000; i += 100)
      await Promise.all(
        Array.from({ length: 100 }, async (_, j) => {
          const s = await get((i + j) % 2 ? a : b, `tg_${randomBytes(32).toString("base64url")}`, agent);
          statuses.set(s, (statuses.get(s) ?? 0) + 1);
        }),
      );
    agent.destroy();
    // 20 per instance were looked up and refused (401); the rest were refused unread (429).
    expect(statuses.get(401)).toBeLessThanOrEqual(2 * 40);
    expect(statuses.get(429)).toBeGreaterThanOrEqual(2000 - 2 * 40);
    const looked = await lookups();
    expect(looked).toBeLessThanOrEqual(2 * 40);
    for (const gw of [a, b]) {
      expect(await get(gw, YAML_KEY)).toBe(200);
      expect(await get(gw, runtimeKey)).toBe(200);
    }
    // A key never served here before is still refused for the rest of the window, unread.
    expect(await get(a, `tg_${randomBytes(32).toString("base64url")}`)).toBe(429);
    expect(await lookups()).toBe(looked);
  }, 60_000);
});
