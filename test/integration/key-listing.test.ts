// The store's key listing (Inspector.listKeys) against a real redis-server and a real 3-master
// Redis Cluster, and the admin API reading keyed limits through it: SCAN with MATCH on a single
// Redis (glob characters in a key taken literally), CLUSTER GETKEYSINSLOT on the slot a caller's
// hash tag names, a scan of every master for a prefix without one, and the bounds on both.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { callerEndpoints } from "../../src/admin/endpoints/callers.js";
import { limitEndpoints } from "../../src/admin/endpoints/limits.js";
import { fromStoreDescribedBy } from "../../src/admin/store-failure.js";
import { compileRuntime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import type { Caller } from "../../src/identity/caller.js";
import { Limiter } from "../../src/limits/limiter.js";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { type RedisClusterProcess, startRedisCluster } from "../support/redis-cluster.js";
import { fakeRequest, fakeResponse } from "../unit/support/fake-http.js";

const loaded = loadConfigText(
  `
store: { url: "memory://", prefix: "kl:" }
upstreams: { api: "http://127.0.0.1:1" }
clients: [{ id: bob, key: bob-key, plan: free, tenant: acme }]
plans:
  free:
    global: { rate: 1/s, burst: 100 }
    routes:
      models: { limit: 100, window: 1h, by: [caller, "header:x-model"] }
routes:
  - { name: models, match: { path: /v1/models }, upstream: api }
`,
  "kl.yaml",
  {},
);
if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
const rt = compileRuntime(loaded.config, { file: "kl.yaml", version: "v" });
const bob: Caller = {
  kind: "client",
  id: "bob",
  plan: [...rt.clientsByKeyHash.values()][0]!.plan,
  tenant: "acme",
  ipKey: "192.0.2.9",
};

interface Topology {
  store: () => RedisStore;
  /** Writes plain keys, so a listing has something to find. */
  write: (keys: readonly string[]) => Promise<void>;
  /** The master serving a key, in a cluster (one server otherwise). */
  serverOf: (key: string) => Promise<number>;
}

/** What every topology must list, the same way. */
function listingBehaviour(kind: string, topology: () => Topology) {
  const all = { maxKeys: 1000, maxScanned: 100_000 };

  it(`${kind}: the keys under each prefix and none other, glob characters taken literally`, async () => {
    const { store, write } = topology();
    const wanted = ["kl:{c:a*b}:free.m:h.x=1", "kl:{c:a*b}:free.m:h.x=2", "kl:{c:a?[b]\\}:free.m:q"];
    // An unescaped pattern would match the first two; the third shares a hash tag (and so a slot).
    await write([...wanted, "kl:{c:aXb}:free.m:h.x=3", "kl:{c:a?[b]\\}:free.m", "kl:{c:a*b}:free.other:1"]);
    const listing = await store().listKeys(["kl:{c:a*b}:free.m:", "kl:{c:a?[b]\\}:free.m:"], all);
    expect(listing.complete).toBe(true);
    expect(listing.keys.sort()).toEqual(wanted.sort());
    // Alone, a prefix is the whole pattern: `[b]` read as a class would match `b`, not `[b]`.
    expect(await store().listKeys(["kl:{c:a?[b]\\}:free.m:"], all)).toEqual({
      keys: ["kl:{c:a?[b]\\}:free.m:q"],
      complete: true,
    });
  });

  it(`${kind}: a prefix without a hash tag is listed from every server`, async () => {
    const { store, write, serverOf } = topology();
    const keys = Array.from({ length: 30 }, (_, i) => `kl-spread:{t${i}}:x`);
    await write(keys);
    const listing = await store().listKeys(["kl-spread:"], all);
    expect(listing).toEqual({ keys: expect.arrayContaining(keys), complete: true });
    expect(listing.keys).toHaveLength(30);
    const servers = new Set(await Promise.all(keys.map(serverOf)));
    expect(servers.size).toBe(kind === "cluster" ? 3 : 1);
  });

  it(`${kind}: at most maxKeys, then incomplete`, async () => {
    const { store, write } = topology();
    await write(["kl:{c:few}:m:1", "kl:{c:few}:m:2", "kl:{c:few}:m:3"]);
    const listing = await store().listKeys(["kl:{c:few}:m:"], { maxKeys: 2, maxScanned: 100_000 });
    expect(listing.keys).toHaveLength(2);
    expect(listing.complete).toBe(false);
  });

  it(`${kind}: at most maxScanned keys examined, then incomplete`, async () => {
    const { store, write } = topology();
    // Enough keys in the slot (and on the server) that a bound of 1000 cannot see them all.
    await write(Array.from({ length: 3000 }, (_, i) => `kl:{c:many}:filler:${i}`));
    await write(["kl:{c:many}:m:1"]);
    const bounded = await store().listKeys(["kl:{c:many}:m:"], { maxKeys: 10, maxScanned: 1000 });
    expect(bounded.complete).toBe(false);
    const unbounded = await store().listKeys(["kl:{c:many}:m:"], all);
    expect(unbounded).toEqual({ keys: ["kl:{c:many}:m:1"], complete: true });
  });

  it(`${kind}: GET /admin/callers lists the values the limiter keyed the caller by`, async () => {
    const store = topology().store();
    const limiter = new Limiter({ store, prefix: "kl:" });
    const route = rt.routeList[0]!;
    for (const model of ["gpt-4", "gpt-4", "claude"]) {
      const decision = await limiter.check(bob, route, {
        headers: { "x-model": model },
        path: "/v1/models",
        query: "",
      });
      expect(decision.kind).toBe("allowed");
    }
    const deps = {
      runtime: () => rt,
      store: () => store,
      limiter: () => ({ flushDenials: async () => {}, forgetDenials: () => {} }),
      fromStore: fromStoreDescribedBy(String),
      audit: { write: async () => {} },
    };
    const ask = async (
      handler: ReturnType<typeof callerEndpoints>["show"],
      params: Record<string, string>,
      query = "",
    ) => {
      const res = fakeResponse();
      await handler({ req: fakeRequest(), res, params, query: new URLSearchParams(query) });
      return res.json();
    };
    const body = await ask(callerEndpoints(deps).show, { caller: "client:bob" });
    expect(body.keyed_limits).toEqual([
      expect.objectContaining({ remaining: 99, key: "kl:{t:acme}:c:bob:free.models:h.x-model=claude" }),
      expect.objectContaining({ remaining: 98, key: "kl:{t:acme}:c:bob:free.models:h.x-model=gpt-4" }),
    ]);
    expect(body.keyed_limits_truncated).toBe(false);
    const one = await ask(limitEndpoints(deps).show, { name: "free.models" }, "key=client:bob&key=gpt-4");
    expect(one).toMatchObject({ remaining: 98, key: "kl:{t:acme}:c:bob:free.models:h.x-model=gpt-4" });
  });
}

describe("a single Redis", () => {
  let redis: RedisProcess;
  let store: RedisStore;
  beforeAll(async () => {
    redis = await startRedis();
    store = new RedisStore({ url: redis.url, timeoutMs: 1000 });
    if (!(await store.waitUntilReady(5000))) throw new Error("test Redis not reachable");
  });
  afterAll(async () => {
    await store?.close();
    await redis?.stop();
  });

  listingBehaviour("standalone", () => ({
    store: () => store,
    write: async (keys) => {
      const pipeline = redis.client.pipeline();
      for (const key of keys) pipeline.set(key, "1");
      await pipeline.exec();
    },
    serverOf: async () => redis.port,
  }));
});

describe("a 3-master Redis Cluster", () => {
  let cluster: RedisClusterProcess;
  let store: RedisStore;
  beforeAll(async () => {
    cluster = await startRedisCluster();
    store = new RedisStore({ cluster: cluster.urls, timeoutMs: 1000 });
    if (!(await store.waitUntilReady(5000))) throw new Error("test cluster not reachable");
  }, 30_000);
  afterAll(async () => {
    await store?.close();
    await cluster?.stop();
  });

  it("cluster: a caller's prefix reads its own slot alone, not its master's keyspace", async () => {
    // Every master holds far more keys than the bound; the slot holds two.
    await Promise.all(Array.from({ length: 300 }, (_, i) => cluster.client.set(`kl-other:{o${i}}`, "1")));
    const keys = ["kl:{c:slot}:m:1", "kl:{c:slot}:m:2"];
    await Promise.all(keys.map((key) => cluster.client.set(key, "1")));
    const listing = await store.listKeys(["kl:{c:slot}:m:"], { maxKeys: 10, maxScanned: 5 });
    expect(listing.complete).toBe(true);
    expect(listing.keys.sort()).toEqual(keys);
  });

  listingBehaviour("cluster", () => ({
    store: () => store,
    write: async (keys) => {
      await Promise.all(keys.map((key) => cluster.client.set(key, "1")));
    },
    serverOf: (key) => cluster.portOf(key),
  }));
});
