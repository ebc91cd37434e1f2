// RedisStores on one real redis-server per test file: started before the file's tests, every
// store closed and the server stopped after them (resumed first, for tests that pause it).
import { afterAll, beforeAll } from "vitest";
import { RedisStore } from "../../src/limits/stores/redis/store.js";
import { type RedisProcess, startRedis } from "./redis.js";

export interface RedisStores {
  /** The file's redis-server (available once its tests run). */
  readonly redis: RedisProcess;
  /** A store on it with this timeout, ready to use. */
  newStore(timeoutMs?: number): Promise<RedisStore>;
}

export function redisStores(defaultTimeoutMs: number): RedisStores {
  let redis: RedisProcess | undefined;
  const stores: RedisStore[] = [];
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    redis?.resume();
    await Promise.all(stores.map((s) => s.close()));
    await redis?.stop();
  });
  return {
    get redis() {
      if (!redis) throw new Error("the test Redis is not started yet");
      return redis;
    },
    async newStore(timeoutMs = defaultTimeoutMs) {
      const store = new RedisStore({ url: this.redis.url, timeoutMs });
      stores.push(store);
      if (!(await store.waitUntilReady(5000))) throw new Error("test Redis not reachable");
      return store;
    },
  };
}
