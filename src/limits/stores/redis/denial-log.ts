// The DenialLog over Redis: denials written per caller (those check.lua decided, queued by the
// store, and those the deny cache decided without it), a caller's log read back, the top list
// summed over its buckets. Each command names one key, so in a cluster each goes to its slot.
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

export class RedisDenialLog implements DenialLog {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly boundary: Boundary,
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
    const flat = await this.boundary.bounded(
      this.client.call("ZUNION", topKeys.length, ...topKeys, "WITHSCORES") as Promise<string[]>,
    );
    const out: { caller: string; count: number }[] = [];
    for (let i = 0; i < flat.length; i += 2) out.push({ caller: flat[i]!, count: Number(flat[i + 1]) });
    return out.sort((a, b) => b.count - a.count || (a.caller < b.caller ? -1 : 1)).slice(0, n);
  }
}
