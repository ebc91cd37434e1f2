// The DenialLog over Redis: the denials decided without the store written per caller, a
// caller's log read back, the top list summed over its buckets. Denials decided by check.lua
// are written by the script itself, in the same entry format (denial-codec.ts).
import type { Cluster, Redis } from "ioredis";
import {
  DENIAL_LOG_MAX,
  DENIAL_LOG_TTL_MS,
  type Denial,
  type DenialBatch,
  type DenialLog,
  TOP_BUCKET_TTL_MS,
} from "../contract.js";
import type { Boundary } from "./boundary.js";
import { decodeDenial, encodeDenial } from "./denial-codec.js";
import type { TopListCounts } from "./top-list.js";

export class RedisDenialLog implements DenialLog {
  /** `counted`: denials counted apart (in a cluster), written before the top list is read. */
  constructor(
    private readonly client: Redis | Cluster,
    private readonly boundary: Boundary,
    private readonly counted: TopListCounts | undefined,
  ) {}

  /** A few commands per caller, whatever its number of denials; auto-pipelined together. */
  recordDenials(batch: readonly DenialBatch[]): Promise<void> {
    const writes: Promise<unknown>[] = [];
    for (const b of batch) {
      const entries = b.entries.slice(-DENIAL_LOG_MAX).map(encodeDenial);
      writes.push(
        this.client.lpush(b.logKey, ...entries),
        this.client.ltrim(b.logKey, 0, DENIAL_LOG_MAX - 1),
        this.client.pexpire(b.logKey, DENIAL_LOG_TTL_MS),
        this.client.zincrby(b.topKey, b.count ?? b.entries.length, b.caller),
        this.client.pexpire(b.topKey, TOP_BUCKET_TTL_MS),
      );
    }
    return this.boundary.bounded(Promise.all(writes)).then(() => undefined);
  }

  async denials(logKey: string): Promise<Denial[]> {
    const entries = await this.boundary.bounded(this.client.lrange(logKey, 0, -1));
    return entries.map(decodeDenial);
  }

  async topDenials(topKeys: readonly string[], n: number): Promise<{ caller: string; count: number }[]> {
    if (topKeys.length === 0) return [];
    await this.counted?.flush();
    const flat = await this.boundary.bounded(
      this.client.call("ZUNION", topKeys.length, ...topKeys, "WITHSCORES") as Promise<string[]>,
    );
    const out: { caller: string; count: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ caller: flat[i]!, count: Number(flat[i + 1]) });
    return out.sort((a, b) => b.count - a.count || (a.caller < b.caller ? -1 : 1)).slice(0, n);
  }
}
