// Runtime overrides (PUT /admin/overrides/{caller}/{limit}) through two in-process gateways on one
// real Redis: a size set through one instance is enforced, stated in RateLimit headers and 429
// bodies, and shown by the admin API on both within a second; it raises and lowers a live caller's
// limit exactly, ends on time by itself, and a body the YAML would refuse is refused with the fix.
import { writeFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type InProcessGateway, startGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const TOKEN = "admin-token-for-runtime-override-tests";

let redis: RedisProcess;
let upstream: TestUpstream;
let a: InProcessGateway;
let b: InProcessGateway;

// Rates of one per minute: nothing refills while a test runs, however slow the machine.
const config = (redisUrl: string, upstreamUrl: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0, token: ${TOKEN} }
log: { level: warn, requests: false }
store: { url: ${redisUrl}, prefix: "rto:" }
upstreams: { api: ${upstreamUrl} }
clients:
  - { id: raise, key: raise-key, plan: pro }
  - { id: lower, key: lower-key, plan: pro }
  - { id: brief, key: brief-key, plan: pro }
  - { id: reset, key: reset-key, plan: pro }
  - { id: patch, key: patch-key, plan: pro }
  - { id: t1, key: t1-key, plan: team, tenant: acme }
  - { id: t2, key: t2-key, plan: team, tenant: acme }
plans:
  pro:
    global: { rate: 1/m, burst: 5 }
  team:
    tenant: { algorithm: fixed_window, limit: 6, window: 1h }
routes:
  - name: search
    match: { path: /search }
    upstream: api
    limits: { total: { limit: 1000, window: 1h } }
  - { name: default, match: { path: / }, upstream: api }
`;

beforeAll(async () => {
  redis = await startRedis();
  upstream = await startUpstream();
  const yaml = config(redis.url, upstream.url);
  [a, b] = await Promise.all([startGateway(yaml), startGateway(yaml)]);
});
afterAll(async () => {
  await Promise.all([a?.stop(), b?.stop()]);
  await upstream?.close();
  await redis?.stop();
});

const auth = { authorization: `Bearer ${TOKEN}` };
const admin = (gw: InProcessGateway, path: string, method = "GET", body?: unknown) =>
  send(gw.adminUrl, {
    path,
    method,
    headers: body === undefined ? auth : { ...auth, "content-type": "application/json" },
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });

/** `n` requests at once with this key, spread over both instances. */
const burst = (key: string, n: number, path = "/x") =>
  Promise.all(
    Array.from({ length: n }, (_, i) => send((i % 2 ? b : a).url, { path, headers: { "x-api-key": key } })),
  );
const admitted = (replies: { status: number }[]) => replies.filter((r) => r.status === 200).length;

interface CallerView {
  limits: { name: string; limit: number; runtime_override?: { reason: string; expires_at: string } }[];
}

/** The size `gw`'s admin API shows for the caller's limit. */
async function shownSize(gw: InProcessGateway, caller: string, name: string): Promise<number | undefined> {
  const view = (await admin(gw, `/admin/callers/${caller}`)).json<CallerView>();
  return view.limits.find((l) => l.name === name)?.limit;
}

/** Polls until `gw` shows `size` for the limit; resolves with how long that took, in ms. */
async function untilShown(gw: InProcessGateway, caller: string, name: string, size: number): Promise<number> {
  const started = performance.now();
  while ((await shownSize(gw, caller, name)) !== size) {
    if (performance.now() - started > 3000) throw new Error(`${caller} ${name} never showed ${size}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  return performance.now() - started;
}

const sleepUntil = (epochMs: number) => new Promise((r) => setTimeout(r, Math.max(0, epochMs - Date.now())));

describe("an override takes only the keys that change", () => {
  it("a burst alone keeps the configured rate, shows the merged limit, and follows a reload", async () => {
    const put = await admin(a, "/admin/overrides/client:patch/pro.global", "PUT", {
      burst: 100,
      expires_in: "1h",
      reason: "launch hour",
    });
    expect(put.status).toBe(201);
    expect(put.json()).toMatchObject({ burst: 100, rate: "1/m", overrides: ["burst"], quota: 100 });
    await untilShown(a, "client:patch", "pro.global", 100);
    const first = await send(a.url, { path: "/x", headers: { "x-api-key": "patch-key" } });
    expect(first.headers["ratelimit-policy"]).toBe('"pro.global";q=100;w=6000');

    // The rate the override left out is the config's: a reload that changes it changes this limit.
    writeFileSync(
      a.configFile,
      config(redis.url, upstream.url).replace("rate: 1/m, burst: 5", "rate: 1/s, burst: 5"),
    );
    expect((await admin(a, "/admin/reload", "POST")).status).toBe(200);
    const view = await admin(a, "/admin/overrides/client:patch/pro.global");
    expect(view.json()).toMatchObject({ burst: 100, rate: "1/s", overrides: ["burst"] });
    const next = await send(a.url, { path: "/x", headers: { "x-api-key": "patch-key" } });
    expect(next.headers["ratelimit-policy"]).toBe('"pro.global";q=100;w=100');
    writeFileSync(a.configFile, config(redis.url, upstream.url));
    expect((await admin(a, "/admin/reload", "POST")).status).toBe(200);
    expect((await admin(a, "/admin/overrides/client:patch/pro.global", "DELETE")).status).toBe(200);
  });
});

describe("an override raises a live caller's limit exactly, on both instances", () => {
  it("admits exactly the new burst, counting what the caller had already used", async () => {
    // Used up (and denied, so each instance's deny cache holds the denial): 5 of 5.
    expect(admitted(await burst("raise-key", 8))).toBe(5);

    const put = await admin(a, "/admin/overrides/client:raise/pro.global", "PUT", {
      burst: 20,
      rate: "1/m",
      expires_in: "1h",
      reason: "launch week",
    });
    expect(put.status).toBe(201);
    expect(put.json()).toMatchObject({
      name: "pro.global",
      caller: "client:raise",
      algorithm: "token_bucket",
      burst: 20,
      rate: "1/m",
      reason: "launch week",
      applies: true,
      quota: 20,
    });
    // In force on both instances within a second of the answer.
    expect(await untilShown(a, "client:raise", "pro.global", 20)).toBeLessThan(1000);
    expect(await untilShown(b, "client:raise", "pro.global", 20)).toBeLessThan(1000);

    // 20 in all: the 15 the bigger bucket has beyond the 5 already taken.
    const after = await burst("raise-key", 25);
    expect(admitted(after)).toBe(15);
    const ok = after.find((r) => r.status === 200)!;
    expect(ok.headers["ratelimit-policy"]).toBe('"pro.global";q=20;w=1200');
    const denied = after.find((r) => r.status === 429)!;
    expect(denied.headers["ratelimit-limit"]).toBe("20");
    expect(denied.json<{ detail: string }>().detail).toContain('"pro.global" allows 20 requests');
  });

  it("shows the override, its reason and expiry in GET /admin/callers on both instances", async () => {
    for (const gw of [a, b]) {
      const view = (await admin(gw, "/admin/callers/client:raise")).json<CallerView>();
      expect(view.limits).toEqual([
        expect.objectContaining({
          name: "pro.global",
          limit: 20,
          key: "rto:{c:raise}:pro.global",
          runtime_override: expect.objectContaining({ reason: "launch week" }),
        }),
      ]);
    }
  });

  it("replacing it answers 200, and it is listed and audited by the token's name", async () => {
    const put = await admin(a, "/admin/overrides/client:raise/pro.global", "PUT", {
      burst: 20,
      rate: "1/m",
      expires_in: "2h",
      reason: "launch week, extended",
    });
    expect(put.status).toBe(200);
    const listed = (await admin(b, "/admin/overrides/client:raise")).json<{
      overrides: { reason: string }[];
    }>();
    expect(listed.overrides.map((o) => o.reason)).toEqual(["launch week, extended"]);
    const audit = (await admin(b, "/admin/audit")).json<{ entries: Record<string, string>[] }>();
    const entries = (audit.entries ?? (audit as unknown as Record<string, string>[])) as Record<
      string,
      string
    >[];
    expect(entries).toContainEqual(
      expect.objectContaining({
        token: "admin",
        action: "PUT /admin/overrides",
        target: "client:raise/pro.global {burst: 20, rate: 1/m} for 2h: launch week, extended",
      }),
    );
  });

  it("DELETE ends it on both instances: the caller is back to its plan's 5", async () => {
    const del = await admin(b, "/admin/overrides/client:raise/pro.global", "DELETE");
    expect(del.status).toBe(200);
    expect(await untilShown(a, "client:raise", "pro.global", 5)).toBeLessThan(1000);
    expect(await untilShown(b, "client:raise", "pro.global", 5)).toBeLessThan(1000);
    expect((await admin(a, "/admin/overrides/client:raise/pro.global")).status).toBe(404);
    const audited = async () =>
      (await admin(b, "/admin/audit")).json<{ entries: unknown[] }>().entries.length;
    const before = await audited();
    expect((await admin(a, "/admin/overrides/client:raise/pro.global", "DELETE")).status).toBe(404);
    // Nothing was removed: nothing is audited.
    expect(await audited()).toBe(before);
    // A fresh bucket, then exactly the plan's burst.
    expect((await admin(a, "/admin/callers/client:raise", "DELETE")).status).toBe(200);
    const replies = await burst("raise-key", 8);
    expect(admitted(replies)).toBe(5);
    expect(replies.find((r) => r.status === 200)!.headers["ratelimit-policy"]).toBe('"pro.global";q=5;w=300');
  });
});

describe("an override lowers a live caller's limit exactly", () => {
  it("admits exactly the smaller burst, on both instances", async () => {
    const put = await admin(b, "/admin/overrides/client:lower/pro.global", "PUT", {
      rate: "1/m",
      burst: 2,
      expires_in: "1h",
      reason: "abusive client",
    });
    expect(put.status).toBe(201);
    await untilShown(a, "client:lower", "pro.global", 2);
    await untilShown(b, "client:lower", "pro.global", 2);
    const replies = await burst("lower-key", 6);
    expect(admitted(replies)).toBe(2);
    expect(replies.find((r) => r.status === 429)!.headers["ratelimit-policy"]).toBe('"pro.global";q=2;w=120');
  });
});

describe("an override of a tenant's limit", () => {
  it("sizes the budget every client of the tenant shares", async () => {
    const put = await admin(a, "/admin/overrides/tenant:acme/team.tenant", "PUT", {
      limit: 3,
      window: "1h",
      expires_in: "1h",
      reason: "tenant over its contract",
    });
    expect(put.status).toBe(201);
    await untilShown(b, "tenant:acme", "team.tenant", 3);
    await untilShown(a, "client:t1", "team.tenant", 3);
    const [one, two] = await Promise.all([burst("t1-key", 4), burst("t2-key", 4)]);
    expect(admitted(one) + admitted(two)).toBe(3);
  });
});

describe("an override ends on time by itself", () => {
  it("expires_in 1s: the headers and the admin API revert on both instances when it ends", async () => {
    const put = await admin(a, "/admin/overrides/client:brief/pro.global", "PUT", {
      burst: 20,
      rate: "1/m",
      expires_in: "1s",
      reason: "a second",
    });
    expect(put.status).toBe(201);
    const endsAt = Date.parse(put.json<{ expires_at: string }>().expires_at);
    await untilShown(b, "client:brief", "pro.global", 20);
    for (const gw of [a, b]) {
      const r = await send(gw.url, { path: "/x", headers: { "x-api-key": "brief-key" } });
      expect(r.headers["ratelimit-limit"]).toBe("20");
    }
    // Just past its end, and with no message saying so: the limit is the plan's again.
    await sleepUntil(endsAt + 20);
    for (const gw of [a, b]) {
      const r = await send(gw.url, { path: "/x", headers: { "x-api-key": "brief-key" } });
      expect(r.headers["ratelimit-limit"]).toBe("5");
      expect(await shownSize(gw, "client:brief", "pro.global")).toBe(5);
      expect((await admin(gw, "/admin/overrides/client:brief/pro.global")).status).toBe(404);
    }
    // The store let go of it too: the hash expires after its last override (plus slack).
    const ttl = await redis.client.pttl("rto:{rt}:ovr:client:brief");
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(61_000);
  });
});

describe("a PUT the override rules refuse: 400 with the fix", () => {
  const put = (path: string, body: unknown) => admin(a, `/admin/overrides/${path}`, "PUT", body);
  const problem = async (path: string, body: unknown) => {
    const r = await put(path, body);
    return { status: r.status, ...r.json<{ type: string; detail: string }>() };
  };
  const good = { burst: 20, rate: "10/s", expires_in: "1h", reason: "test" };

  it.each([
    [
      "a key of another algorithm",
      { ...good, queue: 5 },
      "queue does not apply to pro.global, a token bucket: it takes `rate` + `burst` or `limit` + `window`",
    ],
    ["a misspelt key", { ...good, brust: 20 }, 'unknown key "brust"; did you mean "burst"?'],
    ["no expires_in", { burst: 20, rate: "10/s", reason: "test" }, "expires_in is required"],
    ["too long", { ...good, expires_in: "31d" }, "expires_in: 31d is longer than 30d"],
    ["no reason", { burst: 20, rate: "10/s", expires_in: "1h" }, "reason is required"],
    ["half of the other form", { limit: 20, expires_in: "1h", reason: "test" }, "window is missing"],
    ["a by", { ...good, by: "ip" }, "how it is keyed stays the config's: remove by"],
    ["another algorithm", { ...good, algorithm: "fixed_window" }, "an override keeps its algorithm"],
    ["a bad rate", { ...good, rate: "lots" }, "rate:"],
  ])("%s", async (_what, body, fix) => {
    const r = await problem("client:raise/pro.global", body);
    expect(r.status).toBe(400);
    expect(r.type).toBe("https://tollgate.dev/problems/bad-override");
    expect(r.detail).toContain(fix);
  });

  it("a body that is not JSON", async () => {
    const r = await problem("client:raise/pro.global", "{burst: 20");
    expect(r).toMatchObject({ status: 400, type: "https://tollgate.dev/problems/bad-override" });
    expect(r.detail).toContain("not JSON");
  });

  it("a budget other callers share, or a tenant's limit named for a client", async () => {
    const shared = await problem("client:raise/search.total", {
      limit: 5,
      window: "1h",
      expires_in: "1h",
      reason: "x",
    });
    expect(shared.status).toBe(400);
    expect(shared.detail).toContain("search.total is keyed by route, with no caller or tenant part");
    const tenant = await problem("client:t1/team.tenant", {
      limit: 5,
      window: "1h",
      expires_in: "1h",
      reason: "x",
    });
    expect(tenant.status).toBe(400);
    expect(tenant.detail).toContain(
      "override it for the tenant: PUT /admin/overrides/tenant:<tenant>/team.tenant",
    );
    const plan = await problem("client:raise/team.tenant", {
      limit: 5,
      window: "1h",
      expires_in: "1h",
      reason: "x",
    });
    expect(plan.status).toBe(400);
  });

  it("an unknown limit is a 404 with a did-you-mean; an ip caller a 400", async () => {
    const unknown = await problem("client:raise/pro.globl", good);
    expect(unknown).toMatchObject({ status: 404, type: "https://tollgate.dev/problems/unknown-limit" });
    expect(unknown.detail).toContain('did you mean "pro.global"?');
    const ip = await problem("ip:10.0.0.1/pro.global", good);
    expect(ip).toMatchObject({ status: 400, type: "https://tollgate.dev/problems/bad-caller" });
  });

  it.each(["client:%00", "client:a%20b", "client:%C3%A4", "tenant:*"])(
    "caller %s, an id no client or tenant can have, is a 400 naming the allowed characters",
    async (caller) => {
      const r = await problem(`${caller}/pro.global`, good);
      expect(r).toMatchObject({ status: 400, type: "https://tollgate.dev/problems/bad-caller" });
      expect(r.detail).toContain("may only hold letters, digits and . _ ~ @ + = : - /");
    },
  );

  it("nothing refused was stored", async () => {
    const listed = (await admin(a, "/admin/overrides/client:t1")).json<{ overrides: unknown[] }>();
    expect(listed.overrides).toEqual([]);
  });
});

describe("a gateway started later", () => {
  it("applies the overrides in force from its first request, and tidies away expired ones", async () => {
    const c = await startGateway(config(redis.url, upstream.url));
    try {
      // No waiting: read at start.
      expect(await shownSize(c, "client:lower", "pro.global")).toBe(2);
      expect(await shownSize(c, "tenant:acme", "team.tenant")).toBe(3);
      expect(await shownSize(c, "client:brief", "pro.global")).toBe(5);
      // The expired override's hash and index entry went with the load that found it empty.
      expect(await redis.client.exists("rto:{rt}:ovr:client:brief")).toBe(0);
      expect((await redis.client.smembers("rto:{rt}:ovr-index")).sort()).toEqual([
        "client:lower",
        "tenant:acme",
      ]);
    } finally {
      await c.stop();
    }
  });
});

describe("a Redis restarted without persistence", () => {
  it("takes the overrides with it: every instance drops them within the reconcile interval", async () => {
    expect(await shownSize(a, "client:lower", "pro.global")).toBe(2);
    await redis.kill();
    await redis.restart();
    // RECONCILE_INTERVAL_MS (5 s), plus the reconnect.
    for (const gw of [a, b]) {
      const started = performance.now();
      // While the store reconnects the admin API may answer 503: read on.
      while ((await shownSize(gw, "client:lower", "pro.global").catch(() => undefined)) !== 5) {
        expect(performance.now() - started).toBeLessThan(7000);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }, 20_000);
});

describe("DELETE /admin/callers through one instance", () => {
  it("gives the caller its limits back on the other instance within a second, past its deny cache", async () => {
    const on = (gw: InProcessGateway) => send(gw.url, { path: "/x", headers: { "x-api-key": "reset-key" } });
    const statuses: number[] = [];
    for (let i = 0; i < 8; i++) statuses.push((await on(b)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429, 429, 429]);
    expect((await admin(a, "/admin/callers/client:reset", "DELETE")).status).toBe(200);
    const started = performance.now();
    let status = 429;
    while (status !== 200 && performance.now() - started < 3000) {
      status = (await on(b)).status;
      if (status !== 200) await new Promise((r) => setTimeout(r, 20));
    }
    const ms = performance.now() - started;
    console.log(`reset through A: B served the caller again after ${ms.toFixed(0)} ms`);
    expect(status).toBe(200);
    expect(ms).toBeLessThan(1000);
  });
});
