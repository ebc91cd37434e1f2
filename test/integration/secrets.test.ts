// Secrets never leave: API keys, the admin token, JWTs and the JWT secret appear in no log line
// and no metric, whatever the requests (valid, invalid, denied) and admin calls.
import { SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const API_KEY = "sk-live-PLAINKEY-0123456789";
const WRONG_KEY = "sk-live-WRONGKEY-9876543210";
const ADMIN_TOKEN = "adm-TOKEN-abcdefabcdef";
const JWT_SECRET = "jwt-SECRET-0123456789abcdef0123456789";
const REDIS_PASSWORD = "redisPASSWORD42";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;
let jwt: string;

beforeAll(async () => {
  redis = await startRedis();
  await redis.client.config("SET", "requirepass", REDIS_PASSWORD);
  upstream = await startUpstream();
  const url = new URL(redis.url);
  gw = await startGateway(
    `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: \${ADMIN_TOKEN} }
log: { level: debug, requests: true }
store: { url: "redis://:\${REDIS_PASSWORD}@${url.host}", timeout: 500ms }
upstreams: { api: ${upstream.url} }
identity:
  api_key: { header: x-api-key, bearer: false }
  jwt: { secret: \${JWT_SECRET}, default_plan: free }
clients:
  - { id: keyed, key: \${API_KEY}, plan: free }
plans:
  free: { global: { rate: 1/m, burst: 2 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`,
    { ADMIN_TOKEN, JWT_SECRET, API_KEY, REDIS_PASSWORD },
  );
  jwt = await new SignJWT({ sub: "jwt-user" })
    .setProtectedHeader({ alg: "HS256" })
    .setExpirationTime("5m")
    .sign(Buffer.from(JWT_SECRET));
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.client.config("SET", "requirepass", "").catch(() => {});
  await redis?.stop();
});

describe("secrets stay out of logs and metrics", () => {
  it("after valid, invalid and denied requests and admin calls", async () => {
    const statuses = [];
    for (let i = 0; i < 3; i++)
      statuses.push((await send(gw.url, { path: "/a", headers: { "x-api-key": API_KEY } })).status);
    expect(statuses).toEqual([200, 200, 429]);
    expect((await send(gw.url, { path: `/a?key=x`, headers: { "x-api-key": WRONG_KEY } })).status).toBe(401);
    expect((await send(gw.url, { path: "/b", headers: { authorization: `Bearer ${jwt}` } })).status).toBe(
      200,
    );
    expect((await send(gw.url, { path: "/b", headers: { authorization: `Bearer ${jwt}x` } })).status).toBe(
      401,
    );
    expect(
      (
        await send(gw.adminUrl, {
          path: "/admin/reload",
          method: "POST",
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
      ).status,
    ).toBe(200);
    expect(
      (
        await send(gw.adminUrl, {
          path: "/admin/reload",
          method: "POST",
          headers: { authorization: `Bearer ${WRONG_KEY}` },
        })
      ).status,
    ).toBe(401);
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;

    const everything = JSON.stringify(gw.logs.lines) + metrics;
    expect(gw.logs.lines.length).toBeGreaterThan(5);
    for (const secret of [
      API_KEY,
      WRONG_KEY,
      ADMIN_TOKEN,
      JWT_SECRET,
      REDIS_PASSWORD,
      jwt,
      jwt.split(".")[2]!,
    ]) {
      expect(everything).not.toContain(secret);
    }
  });
});
