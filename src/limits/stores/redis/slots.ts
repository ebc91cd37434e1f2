// Where a key lives: its hash slot, and the master serving that slot. In a Redis Cluster a
// script's keys must share a slot, so batches and multi-key calls are made per slot; on a single
// Redis everything is slot 0 on shard "", and through Sentinel slot 0 on the master it is
// connected to (host:port), so that a new master is a new shard: its own breaker and clock.
import calculateSlot from "cluster-key-slot";
import { Cluster, type Redis } from "ioredis";
import type { LimitCheck } from "../../spec.js";

export class Slots {
  /** In a Redis Cluster a script's keys must share a slot: batches and groups are per slot. */
  readonly clustered: boolean;

  /** Through Sentinel, the master last connected to (host:port); "" otherwise. */
  master = "";

  constructor(private readonly client: Redis | Cluster) {
    this.clustered = client instanceof Cluster;
  }

  /** The slot of a key (0 for a single Redis: everything batches together). */
  of(key: string): number {
    return this.clustered ? calculateSlot(key) : 0;
  }

  /** The master serving a slot, in a cluster ("" before the slot map is known, and on a single Redis). */
  shardOfSlot(slot: number): string {
    return this.clustered ? ((this.client as Cluster).slots[slot]?.[0] ?? "") : this.master;
  }

  /** The master serving the slot of the first key, in a cluster; `master` otherwise. */
  shardOf(checks: readonly LimitCheck[]): string {
    if (!this.clustered) return this.master;
    if (checks.length === 0) return "";
    // Before the slot map is known every check shares one state, as on a single Redis.
    return this.shardOfSlot(this.of(checks[0]!.key));
  }

  /** The indexes of `checks` by the slot of their key, in order of first appearance. */
  group(checks: readonly LimitCheck[]): Map<number, number[]> {
    const groups = new Map<number, number[]>();
    checks.forEach((c, i) => {
      const slot = this.of(c.key);
      const group = groups.get(slot);
      if (group) group.push(i);
      else groups.set(slot, [i]);
    });
    return groups;
  }
}
