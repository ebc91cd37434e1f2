// Keys issued at runtime, without Redis or a wall clock: the cache (positive until changed or
// expired, negative for NEGATIVE_TTL_MS and never evicting a positive entry, bounded), the
// per-address lookup throttle and its stated bound, the lookup wiring (a cached key asks nothing,
// a change during a lookup keeps its answer out of the cache, the store's failure follows
// on_failure), the change feed's reconcile over a fake stream (delivered once, trimmed or
// vanished → reset), the in-process key store (rotation's grace, expiry), and the checks a key's
// plan and limits get.
import { EventEmitter } from "node:events";
import { describe, expect, it } from "vitest";
import { compileRuntime, type Runtime } from "../../src/config/compile.js";
import { loadConfigText } from "../../src/config/load.js";
import {
  KeyCache,
  LOOKUP_BURST,
  LOOKUP_RATE_PER_S,
  LookupThrottle,
  lookupBound,
  NEGATIVE_TTL_MS,
} from "../../src/operator-state/api-key-cache.js";
import { KeyLookup } from "../../src/operator-state/api-key-lookup.js";
import { checkKeySpec } from "../../src/operator-state/api-key-spec.js";
import {
  fingerprintOf,
  MemoryKeyStore,
  type StoredKey,
  sha256Hex,
} from "../../src/operator-state/api-keys.js";
import {
  CHANGE_STREAM_MAX,
  type Change,
  compareStreamIds,
  decodeChange,
  encodeChange,
  MemoryChangeFeed,
  RedisChangeFeed,
} from "../../src/operator-state/changes.js";

function clock(start = 1_000_000) {
  const c = { t: start, now: () => c.t };
  return c;
}

function runtime(extra = "", onFailure = "open"): Runtime {
  const loaded = loadConfigText(
    `store: { url: "memory://", on_failure: ${onFailure} }
upstreams: { api: http://127.0.0.1:1 }
clients: [{ id: yaml-client, key: yaml-key, plan: free }]
plans:
  free: { global: { rate: 10/s, burst: 10 }, routes: { search: { rate: 1/s, burst: 5 } } }
  pro: { global: { rate: 100/s, burst: 100 }, routes: { search: { rate: 10/s, burst: 20 }, shared: { rate: 5/s, burst: 5, by: ip } } }
routes:
  - { name: search, match: { path: /search }, upstream: api }
  - { name: shared, match: { path: /shared }, upstream: api }
${extra}`,
    "gw.yaml",
    {},
  );
  if (!loaded.ok) throw new Error(JSON.stringify(loaded.problems));
  return compileRuntime(loaded.config, { file: "gw.yaml", version: "1" });
}

const RT = runtime();

function stored(hash: string, over: Partial<StoredKey> = {}): StoredKey {
  return {
    id: "key_aaaaaaaaaaaa",
    hash,
    client: "acme",
    plan: "pro",
    tenant: undefined,
    limits: undefined,
    createdAtMs: 0,
    expiresAtMs: undefined,
    ...over,
  };
}

describe("KeyCache", () => {
  it("keeps a found key until a change names it, and forgets everything on a reset", () => {
    const c = clock();
    const cache = new KeyCache<string>(c.now);
    cache.remember("h1", "v1", undefined);
    cache.remember("h2", "v2", undefined);
    c.t += 365 * 86_400_000;
    expect(cache.get("h1")).toEqual({ kind: "found", value: "v1" });
    cache.invalidate("h1");
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.get("h2")).toEqual({ kind: "found", value: "v2" });
    cache.clear();
    expect(cache.get("h2")).toBeUndefined();
  });

  it("stops serving a key at its expiry, without asking the store", () => {
    const c = clock();
    const cache = new KeyCache<string>(c.now);
    cache.remember("h", "v", c.t + 1000);
    c.t += 999;
    expect(cache.get("h")?.kind).toBe("found");
    c.t += 1;
    expect(cache.get("h")).toEqual({ kind: "unknown" });
  });

  it("believes an unknown key for NEGATIVE_TTL_MS, then asks again", () => {
    const c = clock();
    const cache = new KeyCache<string>(c.now);
    cache.rememberUnknown("h");
    c.t += NEGATIVE_TTL_MS - 1;
    expect(cache.get("h")).toEqual({ kind: "unknown" });
    c.t += 1;
    expect(cache.get("h")).toBeUndefined();
  });

  it("holds at most `max` keys, the least recently used let go first", () => {
    const c = clock();
    const cache = new KeyCache<number>(c.now, () => 3);
    for (let i = 0; i < 3; i++) cache.remember(`h${i}`, i, undefined);
    expect(cache.get("h0")?.kind).toBe("found"); // h0 is now the most recent
    cache.remember("h3", 3, undefined);
    expect(cache.get("h1")).toBeUndefined();
    expect(cache.get("h0")?.kind).toBe("found");
    expect(cache.size.positive).toBe(3);
  });

  it("shrinks to a smaller `max` (a reload) at the next insert", () => {
    let max = 5;
    const cache = new KeyCache<number>(clock().now, () => max);
    for (let i = 0; i < 5; i++) cache.remember(`h${i}`, i, undefined);
    max = 2;
    cache.remember("h5", 5, undefined);
    expect(cache.size.positive).toBe(2);
  });

  it("a flood of unknown keys never evicts a found one", () => {
    const cache = new KeyCache<string>(clock().now, () => 10, NEGATIVE_TTL_MS, 100);
    cache.remember("customer", "v", undefined);
    for (let i = 0; i < 100_000; i++) cache.rememberUnknown(`random${i}`);
    expect(cache.get("customer")).toEqual({ kind: "found", value: "v" });
    expect(cache.size).toEqual({ positive: 1, negative: 100 });
  });
});

describe("LookupThrottle", () => {
  it("lets one address cause LOOKUP_BURST lookups at once, then LOOKUP_RATE_PER_S", () => {
    const c = clock();
    const t = new LookupThrottle(c.now);
    let allowed = 0;
    for (let i = 0; i < 1000; i++) if (t.take("ip:192.0.2.1")) allowed++;
    expect(allowed).toBe(LOOKUP_BURST);
    c.t += 1000;
    allowed = 0;
    for (let i = 0; i < 1000; i++) if (t.take("ip:192.0.2.1")) allowed++;
    expect(allowed).toBe(LOOKUP_RATE_PER_S);
    // Another address has its own bucket.
    expect(t.take("ip:192.0.2.2")).toBe(true);
  });

  it("100,000 unknown keys from one address over 10 s: at most lookupBound(10)", () => {
    const c = clock();
    const t = new LookupThrottle(c.now);
    let allowed = 0;
    for (let i = 0; i < 100_000; i++) {
      c.t += 0.1; // 10,000 requests a second
      if (t.take("ip:198.51.100.7")) allowed++;
    }
    expect(allowed).toBeLessThanOrEqual(lookupBound(10));
    expect(lookupBound(10)).toBe(LOOKUP_BURST + 10 * LOOKUP_RATE_PER_S);
  });

  it("holds at most maxAddresses buckets, the idlest let go", () => {
    const t = new LookupThrottle(clock().now, 2, 1, 3);
    for (const ip of ["a", "b", "c", "d"]) t.take(ip);
    expect(t.size).toBe(3);
  });
});

/** A store whose lookups the test answers by hand. */
function fakeStore() {
  const calls: string[] = [];
  const pending: { hash: string; resolve: (r: StoredKey | undefined) => void; reject: (e: Error) => void }[] =
    [];
  return {
    calls,
    pending,
    lookup(hash: string): Promise<StoredKey | undefined> {
      calls.push(hash);
      return new Promise((resolve, reject) => pending.push({ hash, resolve, reject }));
    },
  };
}

describe("KeyLookup", () => {
  it("a cached key answers synchronously and asks the store nothing", async () => {
    const store = fakeStore();
    const feed = new MemoryChangeFeed();
    const lookup = new KeyLookup({ store, feed, now: clock().now });
    const first = lookup.find("h", "ip:1", RT);
    expect(first).toBeInstanceOf(Promise);
    store.pending[0]!.resolve(stored("h"));
    expect(await first).toMatchObject({ kind: "client", client: { id: "acme", plan: { name: "pro" } } });
    for (let i = 0; i < 1000; i++) {
      const again = lookup.find("h", "ip:1", RT);
      expect(again).not.toBeInstanceOf(Promise);
    }
    expect(store.calls).toEqual(["h"]);
  });

  it("concurrent requests with one uncached key share one lookup", async () => {
    const store = fakeStore();
    const lookup = new KeyLookup({ store, feed: new MemoryChangeFeed(), now: clock().now });
    const answers = [
      lookup.find("h", "ip:1", RT),
      lookup.find("h", "ip:2", RT),
      lookup.find("h", "ip:3", RT),
    ];
    store.pending[0]!.resolve(stored("h"));
    for (const a of await Promise.all(answers)) expect(a).toMatchObject({ kind: "client" });
    expect(store.calls).toEqual(["h"]);
  });

  it("a change names the key: the next request asks the store again (a revoked key is refused)", async () => {
    const store = fakeStore();
    const feed = new MemoryChangeFeed();
    const lookup = new KeyLookup({ store, feed, now: clock().now });
    const first = lookup.find("h", "ip:1", RT);
    store.pending[0]!.resolve(stored("h"));
    await first;
    await feed.publish({ kind: "key", hash: "h" });
    const after = lookup.find("h", "ip:1", RT);
    store.pending[1]!.resolve(undefined);
    expect(await after).toEqual({ kind: "unknown", throttled: false });
  });

  it("an answer that a change overtook serves its request but is not cached", async () => {
    const store = fakeStore();
    const feed = new MemoryChangeFeed();
    const lookup = new KeyLookup({ store, feed, now: clock().now });
    const inFlight = lookup.find("h", "ip:1", RT);
    await feed.publish({ kind: "key", hash: "h" }); // revoked while the HGETALL was under way
    store.pending[0]!.resolve(stored("h"));
    expect(await inFlight).toMatchObject({ kind: "client" });
    const next = lookup.find("h", "ip:1", RT);
    expect(next).toBeInstanceOf(Promise);
    store.pending[1]!.resolve(undefined);
    expect(await next).toMatchObject({ kind: "unknown" });
  });

  it("a reset forgets every cached key", async () => {
    const store = fakeStore();
    const listeners: (() => void)[] = [];
    const feed = { onChange: () => {}, onReset: (l: () => void) => listeners.push(l) };
    const lookup = new KeyLookup({ store, feed, now: clock().now });
    const first = lookup.find("h", "ip:1", RT);
    store.pending[0]!.resolve(stored("h"));
    await first;
    for (const l of listeners) l();
    expect(lookup.find("h", "ip:1", RT)).toBeInstanceOf(Promise);
  });

  it("past its address's lookups an unknown key is unknown without asking", () => {
    const store = fakeStore();
    const results: string[] = [];
    const lookup = new KeyLookup({
      store,
      feed: new MemoryChangeFeed(),
      now: clock().now,
      onLookup: (r) => results.push(r),
    });
    for (let i = 0; i < 100; i++) lookup.find(`random${i}`, "ip:6", RT);
    expect(store.calls.length).toBe(LOOKUP_BURST);
    expect(lookup.find("another", "ip:6", RT)).toEqual({ kind: "unknown", throttled: true });
    expect(results.filter((r) => r === "throttled").length).toBe(101 - LOOKUP_BURST);
  });

  it("the store failing: unavailable, closed only under on_failure: closed, and nothing cached", async () => {
    for (const [rt, closed] of [
      [RT, false],
      [runtime("", "closed"), true],
    ] as const) {
      const store = fakeStore();
      const lookup = new KeyLookup({ store, feed: new MemoryChangeFeed(), now: clock().now });
      const answer = lookup.find("h", "ip:1", rt);
      store.pending[0]!.reject(new Error("connection refused"));
      expect(await answer).toEqual({ kind: "unavailable", closed });
      expect(lookup.find("h", "ip:1", rt)).toBeInstanceOf(Promise);
    }
  });

  it("a YAML client of the same id wins; a vanished plan or limits that no longer fit are refused", async () => {
    const store = fakeStore();
    const lookup = new KeyLookup({ store, feed: new MemoryChangeFeed(), now: clock().now });
    const ask = async (r: StoredKey, rt = RT) => {
      const answer = lookup.find(r.hash, "ip:1", rt);
      store.pending.at(-1)!.resolve(r);
      return answer;
    };
    expect(await ask(stored("y", { client: "yaml-client", plan: "pro" }))).toMatchObject({
      kind: "client",
      client: { id: "yaml-client", plan: { name: "free" } },
    });
    expect(await ask(stored("g", { plan: "gold" }))).toMatchObject({
      kind: "unusable",
      detail: expect.stringContaining('its plan "gold" is not in the gateway\'s configuration'),
    });
    const sized = stored("s", { limits: { global: { rate: "500/s", burst: 500 } } });
    const sizedAnswer = await ask(sized);
    expect(sizedAnswer).toMatchObject({ kind: "client", client: { plan: { name: "pro" } } });
    if (sizedAnswer.kind !== "client") throw new Error("expected a client");
    const global = sizedAnswer.client.plan.limits.find((l) => l.spec.name === "pro.global");
    expect(global?.quota).toBe(500);
    // The same key after a reload whose plan has no global limit any more.
    const reloaded = runtime().config;
    const noGlobal = compileRuntime(
      { ...reloaded, plans: { ...reloaded.plans, pro: { ...reloaded.plans.pro!, global: undefined } } },
      { file: "gw.yaml", version: "2" },
    );
    expect(lookup.find("s", "ip:1", noGlobal)).toMatchObject({
      kind: "unusable",
      detail: expect.stringContaining("its own limits no longer fit"),
    });
  });
});

describe("checkKeySpec: a key's client, plan, tenant and limits, by clients[]'s rules", () => {
  const check = (input: Parameters<typeof checkKeySpec>[1]) => checkKeySpec(RT.config, input);

  it("accepts a plan of the config, with limits that size its caller-keyed limits", () => {
    expect(check({ client: "acme", plan: "pro" })).toEqual({ ok: true, limits: undefined });
    expect(
      check({ client: "acme", plan: "pro", limits: { routes: { search: { rate: "50/s", burst: 50 } } } }).ok,
    ).toBe(true);
  });

  it.each([
    [{ client: "acme", plan: "gold" }, 'plan: unknown plan "gold"'],
    [{ client: "jwt:bob", plan: "pro" }, 'client: client ids starting with "jwt:" are reserved'],
    [
      { client: "acme", plan: "pro", limits: { routes: { nope: { rate: "1/s", burst: 1 } } } },
      'has no limit for route "nope"',
    ],
    [{ client: "acme", plan: "pro", limits: { global: { rate: "fast" } } }, "limits.global"],
    [
      { client: "acme", plan: "pro", limits: { routes: { shared: { rate: "9/s", burst: 9 } } } },
      "limits.routes.shared",
    ],
    [{ client: "acme", plan: "pro", limits: { bogus: 1 } }, "limits"],
  ])("refuses %j naming the fix", (input, message) => {
    const r = check(input);
    expect(r.ok).toBe(false);
    expect((r as { problems: string[] }).problems.join("\n")).toContain(message);
  });
});

describe("MemoryKeyStore", () => {
  it("keeps only the hash; a rotation keeps the old key for the grace, then only the new one", async () => {
    const c = clock();
    const feed = new MemoryChangeFeed();
    const changes: Change[] = [];
    feed.onChange((ch) => changes.push(ch));
    const keys = new MemoryKeyStore(feed, { now: c.now });
    const { key, record } = await keys.create({ client: "acme", plan: "pro" });
    expect(record.hash).toBe(sha256Hex(key));
    expect(JSON.stringify(record)).not.toContain(key);
    expect(fingerprintOf(record.hash)).toHaveLength(12);
    const rotated = await keys.rotate(record.id, 2000);
    expect(rotated?.previous.expiresAtMs).toBe(c.t + 2000);
    expect(await keys.lookup(record.hash)).toBeDefined();
    expect(await keys.lookup(rotated!.issued.record.hash)).toBeDefined();
    c.t += 2000;
    expect(await keys.lookup(record.hash)).toBeUndefined();
    expect((await keys.list("acme")).map((k) => k.id)).toEqual([rotated!.issued.record.id]);
    // Every write published the hash it changed.
    expect(changes).toEqual([
      { kind: "key", hash: record.hash },
      { kind: "key", hash: rotated!.issued.record.hash },
      { kind: "key", hash: record.hash },
    ]);
  });

  it("expires_in: the key is gone at its expiry; revoke is at once", async () => {
    const c = clock();
    const keys = new MemoryKeyStore(new MemoryChangeFeed(), { now: c.now });
    const a = await keys.create({ client: "acme", plan: "pro", expiresInMs: 1000 });
    const b = await keys.create({ client: "acme", plan: "pro" });
    c.t += 1000;
    expect(await keys.lookup(a.record.hash)).toBeUndefined();
    expect(await keys.revoke(b.record.id)).toMatchObject({ id: b.record.id });
    expect(await keys.lookup(b.record.hash)).toBeUndefined();
    expect(await keys.revoke(b.record.id)).toBeUndefined();
  });

  it("refuses past its bound, naming the fix", async () => {
    const keys = new MemoryKeyStore(new MemoryChangeFeed(), { now: clock().now, max: 2 });
    await keys.create({ client: "a", plan: "pro" });
    await keys.create({ client: "b", plan: "pro" });
    await expect(keys.create({ client: "c", plan: "pro" })).rejects.toThrow(
      /its most: revoke some, or use a Redis store/,
    );
  });
});

describe("change encoding", () => {
  it("round-trips every kind and ignores what it does not know", () => {
    for (const ch of [
      { kind: "key", hash: "ab" },
      { kind: "override", caller: "client:acme" },
      { kind: "reset", keys: ["tg:{c:acme}:pro.global", "tg:{c:acme}:c:acme:denials"] },
      { kind: "reset", keys: [] },
    ] as Change[])
      expect(decodeChange(encodeChange(ch))).toEqual(ch);
    expect(decodeChange('{"k":"reset","ks":"tg:{c:acme}:pro.global"}')).toBeUndefined();
    expect(decodeChange('{"k":"reset","ks":[1]}')).toBeUndefined();
    expect(decodeChange('{"k":"mark"}')).toBeUndefined();
    expect(decodeChange("not json")).toBeUndefined();
    expect(decodeChange('{"k":"future","x":1}')).toBeUndefined();
  });

  it("orders stream ids numerically", () => {
    expect(compareStreamIds("9-0", "10-0")).toBe(-1);
    expect(compareStreamIds("10-2", "10-10")).toBe(-1);
    expect(compareStreamIds("10-2", "10-2")).toBe(0);
  });
});

/** A Redis with one stream and pub/sub, enough for the change feed. */
class FakeRedis {
  entries: [string, string[]][] = [];
  seq = 0;
  readonly subscribers: EventEmitter[] = [];
  publishes = 0;
  /** XLEN's answer when set (a stream that has been trimmed), else the entries held. */
  length: number | undefined;
  /** The epoch key's value (EVAL of the epoch script creates it when missing). */
  epoch: string | undefined;
  /** Set: every command rejects with it (Redis unreachable). */
  down: Error | undefined;

  /** Redis restarted empty: no stream, no epoch. */
  restartEmpty(): void {
    this.entries = [];
    this.length = undefined;
    this.epoch = undefined;
  }
  async eval(_script: string, _n: number, _key: string, fresh: string) {
    if (this.down) throw this.down;
    this.epoch ??= fresh;
    return this.epoch;
  }

  add(fields: string[]): string {
    const id = `${1000 + this.seq++}-0`;
    this.entries.push([id, fields]);
    return id;
  }
  async xrange(_key: string, from: string, _to: string, _count: string, n: number) {
    return this.entries.filter(([id]) => compareStreamIds(id, from) >= 0).slice(0, n);
  }
  async xlen() {
    return this.length ?? this.entries.length;
  }
  async xrevrange() {
    return this.entries.slice(-1);
  }
  async xadd(_key: string, ..._args: (string | number)[]) {
    return this.add(["c", String(_args.at(-1))]);
  }
  multi(writes: unknown[]) {
    let fields: string[] = [];
    return {
      xadd: (...args: (string | number)[]) => {
        fields = ["c", String(args.at(-1))];
      },
      exec: async () => [...writes.map(() => [null, "OK"]), [null, this.add(fields)]],
    };
  }
  async publish(_channel: string, message: string) {
    this.publishes++;
    for (const s of this.subscribers) s.emit("message", "p:rt:changes", message);
    return 1;
  }
  duplicate() {
    const sub = Object.assign(new EventEmitter(), {
      subscribe: async () => 1,
      disconnect: () => {},
    });
    this.subscribers.push(sub);
    return sub;
  }
}

function feedOn(redis: FakeRedis) {
  const feed = new RedisChangeFeed({
    client: redis as never,
    prefix: "p:",
    every: () => ({ cancel: () => {} }),
  });
  const changes: Change[] = [];
  let resets = 0;
  feed.onChange((c) => changes.push(c));
  feed.onReset(() => resets++);
  feed.start();
  return { feed, changes, resets: () => resets };
}

describe("RedisChangeFeed over a fake stream", () => {
  it("a change heard by pub/sub is not delivered again by the reconcile", async () => {
    const redis = new FakeRedis();
    const a = feedOn(redis);
    const b = feedOn(redis);
    await a.feed.reconcile();
    await b.feed.reconcile();
    await a.feed.publish({ kind: "key", hash: "h1" });
    expect(a.changes).toEqual([{ kind: "key", hash: "h1" }]);
    expect(b.changes).toEqual([{ kind: "key", hash: "h1" }]);
    await a.feed.reconcile();
    await b.feed.reconcile();
    expect(a.changes).toHaveLength(1);
    expect(b.changes).toHaveLength(1);
  });

  it("a lost message is delivered by the next reconcile", async () => {
    const redis = new FakeRedis();
    const b = feedOn(redis);
    await b.feed.reconcile();
    // Written by another instance whose PUBLISH never arrived.
    redis.add(["c", encodeChange({ kind: "override", caller: "client:acme" })]);
    expect(b.changes).toEqual([]);
    await b.feed.reconcile();
    expect(b.changes).toEqual([{ kind: "override", caller: "client:acme" }]);
  });

  it("a stream trimmed past the cursor, or gone (Redis restarted empty), resets", async () => {
    const redis = new FakeRedis();
    redis.add(["c", encodeChange({ kind: "key", hash: "before" })]);
    const b = feedOn(redis);
    await b.feed.reconcile();
    redis.add(["c", encodeChange({ kind: "key", hash: "x" })]);
    redis.entries = redis.entries.slice(-1); // trimmed: the cursor's entry is gone
    await b.feed.reconcile();
    expect(b.resets()).toBe(1);
    redis.entries = []; // vanished
    await b.feed.reconcile();
    expect(b.resets()).toBe(2);
    // And then it follows the new stream as before.
    redis.add(["c", encodeChange({ kind: "key", hash: "y" })]);
    await b.feed.reconcile();
    expect(b.changes).toEqual([{ kind: "key", hash: "y" }]);
    expect(b.resets()).toBe(2);
  });

  it("writes nothing while nobody changes anything", async () => {
    const redis = new FakeRedis();
    const b = feedOn(redis);
    await b.feed.reconcile();
    await b.feed.reconcile();
    expect(redis.entries).toEqual([]);
    expect(b.resets()).toBe(0);
  });

  it("no stream at the last read: a change heard since and gone again resets", async () => {
    const redis = new FakeRedis();
    const a = feedOn(redis);
    const b = feedOn(redis);
    await b.feed.reconcile();
    await a.feed.publish({ kind: "key", hash: "h" });
    expect(b.changes).toHaveLength(1);
    redis.entries = []; // Redis restarted empty before b's reconcile
    await b.feed.reconcile();
    expect(b.resets()).toBe(1);
  });

  it("no stream at the last read, pub/sub lost, Redis restarted empty: the epoch resets every instance", async () => {
    const redis = new FakeRedis();
    const a = feedOn(redis);
    const b = feedOn(redis);
    await a.feed.reconcile();
    await b.feed.reconcile();
    // b caches a key by lookup; the change that created it never reached b (pub/sub lost, and
    // no reconcile ran before the restart).
    redis.add(["c", encodeChange({ kind: "key", hash: "created" })]);
    redis.restartEmpty();
    await a.feed.reconcile();
    await b.feed.reconcile();
    expect(a.resets()).toBe(1);
    expect(b.resets()).toBe(1);
    // Both adopted the new epoch: no more resets.
    await a.feed.reconcile();
    await b.feed.reconcile();
    expect([a.resets(), b.resets()]).toEqual([1, 1]);
  });

  it("Redis restarted empty and a new stream trimmed since: the epoch resets", async () => {
    const redis = new FakeRedis();
    const b = feedOn(redis);
    await b.feed.reconcile();
    redis.restartEmpty();
    for (const h of ["n1", "n2", "n3"]) redis.add(["c", encodeChange({ kind: "key", hash: h })]);
    redis.entries = redis.entries.slice(-1); // trimmed, and short: the stream alone tells nothing
    await b.feed.reconcile();
    expect(b.resets()).toBe(1);
    expect(b.changes).toEqual([]);
  });

  it("an instance started after the restart: the epoch it creates resets the older ones, and later restarts reset it", async () => {
    const redis = new FakeRedis();
    const a = feedOn(redis);
    await a.feed.reconcile();
    redis.restartEmpty();
    const c = feedOn(redis);
    await c.feed.reconcile(); // c creates the new epoch before a's next reconcile
    expect(c.resets()).toBe(0);
    await a.feed.reconcile();
    expect(a.resets()).toBe(1);
    redis.restartEmpty();
    await c.feed.reconcile();
    await a.feed.reconcile();
    expect([a.resets(), c.resets()]).toEqual([2, 1]);
  });

  it("a reconcile failed before any read the epoch: the first that succeeds resets", async () => {
    const redis = new FakeRedis();
    const errors: Error[] = [];
    const feed = new RedisChangeFeed({
      client: redis as never,
      prefix: "p:",
      every: () => ({ cancel: () => {} }),
      onError: (e) => errors.push(e),
    });
    let resets = 0;
    feed.onReset(() => resets++);
    redis.down = new Error("connect ECONNREFUSED");
    feed.start();
    await feed.reconcile();
    expect(errors).toHaveLength(1);
    expect(resets).toBe(0);
    redis.down = undefined;
    await feed.reconcile();
    expect(resets).toBe(1);
    await feed.reconcile();
    expect(resets).toBe(1);
  });

  it("no stream at the last read: a stream found past CHANGE_STREAM_MAX may have been trimmed, so it resets", async () => {
    const redis = new FakeRedis();
    const b = feedOn(redis);
    await b.feed.reconcile();
    redis.add(["c", encodeChange({ kind: "key", hash: "late" })]);
    redis.length = CHANGE_STREAM_MAX;
    await b.feed.reconcile();
    expect(b.resets()).toBe(1);
    expect(b.changes).toEqual([]);
  });
});
