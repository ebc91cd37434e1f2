// One undici Pool per upstream. Pools outlive runtimes: a reload keeps the pool of an upstream
// whose connection settings did not change and closes (drains, not cuts) the others.
import { Pool } from "undici";
import type { CompiledUpstream } from "../config/compile.js";

export class UpstreamPools {
  private readonly pools = new Map<string, { key: string; pool: Pool }>();

  get(upstream: CompiledUpstream): Pool {
    const existing = this.pools.get(upstream.name);
    if (existing && existing.key === upstream.poolKey) return existing.pool;
    const pool = new Pool(upstream.origin, {
      connections: upstream.connections,
      // One request per connection at a time: pipelining puts a slow response in front of
      // unrelated ones (head-of-line blocking).
      pipelining: 1,
      connect: { timeout: upstream.connectTimeoutMs },
      keepAliveTimeout: 4000,
    });
    if (existing) void existing.pool.close().catch(() => {});
    this.pools.set(upstream.name, { key: upstream.poolKey, pool });
    return pool;
  }

  /**
   * After a reload: closes the pools of upstreams that are gone or whose connection settings
   * changed. close() lets their requests in flight finish (drain), it does not cut them.
   */
  retain(upstreams: ReadonlyMap<string, CompiledUpstream>): void {
    for (const [name, entry] of this.pools) {
      const next = upstreams.get(name);
      if (next && next.poolKey === entry.key) continue;
      this.pools.delete(name);
      void entry.pool.close().catch(() => {});
    }
  }

  /** Waits for requests in flight, then closes every pool. */
  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.pool.close()));
  }

  /** Ends every connection now, aborting requests still in flight (after the shutdown grace). */
  async destroy(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.allSettled(pools.map((p) => p.pool.destroy()));
  }
}
