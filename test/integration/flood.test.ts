// A caller far past its limit costs Redis nothing: once the store has denied it, the instance
// answers its repeats from the deny cache (at most 0.01 Redis commands per denied request), and
// the admin API still counts every denial.
import { Agent } from "node:http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

let redis: RedisProcess;
let upstream: TestUpstream;
let gw: InProcessGateway;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  gw = await startGateway(`
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: flood-admin }
log: { level: warn, requests: false }
store: { url: ${redis.url}, timeout: 500ms }
upstreams: { api: ${upstream.url} }
clients:
  - { id: flooder, key: flood-key, plan: p }
  - { id: polite, key: polite-key, plan: p }
plans:
  p: { global: { rate: 1/m, burst: 5 } }
routes:
  - { name: default, match: { path: / }, upstream: api }
`);
});
afterAll(async () => {
  await gw?.stop();
  await upstream?.close();
  await redis?.stop();
});

async function commandsProcessed(): Promise<number> {
  const info = await redis.client.info("stats");
  return Number(/total_commands_processed:(\d+)/.exec(info)![1]);
}

describe("a flood of denied requests", () => {
  it("2000 requests past the limit: ≤ 0.01 Redis commands per denial, every denial still counted", async () => {
    const agent = new Agent({ keepAlive: true, maxSockets: 32 });
    const headers = { "x-api-key": "flood-key" };
    for (let i = 0; i < 6; i++) await send(gw.url, { path: "/x", headers, agent }); // 5 admitted, 1 denied by the store
    const before = await commandsProcessed();
    const N = 2000;
    let denied = 0;
    for (let batch = 0; batch < N / 100; batch++) {
      const replies = await Promise.all(
        Array.from({ length: 100 }, () => send(gw.url, { path: "/x", headers, agent })),
      );
      denied += replies.filter((r) => r.status === 429).length;
      expect(replies.every((r) => r.headers["retry-after"] !== undefined)).toBe(true);
    }
    agent.destroy();
    expect(denied).toBe(N);
    const metrics = (await send(gw.adminUrl, { path: "/metrics" })).body;
    expect(Number(/tollgate_local_denials_total (\d+)/.exec(metrics)![1])).toBe(N);
    // The admin API counts all of them: the locally decided ones are flushed before it reads.
    const top = await send(gw.adminUrl, {
      path: "/admin/denials/top",
      headers: { authorization: "Bearer flood-admin" },
    });
    expect(top.json<{ callers: { caller: string; denials: number }[] }>().callers[0]).toEqual({
      caller: "client:flooder",
      denials: N + 1,
    });
    // Everything Redis did since the flood began, the flush of its records and the admin read
    // included (minus this INFO call).
    const used = (await commandsProcessed()) - before - 1;
    expect(used / denied).toBeLessThanOrEqual(0.01);
    // Another caller is unaffected.
    expect((await send(gw.url, { path: "/x", headers: { "x-api-key": "polite-key" } })).status).toBe(200);
    console.log(
      `[flood] ${denied} denials cost ${used} Redis commands (${(used / denied).toFixed(4)} per denial)`,
    );
  });
});
