// Which keys start with given prefixes: for the admin API ("which header values has this caller
// been limited by"), never on a request's path, and bounded either way.
//
// A single Redis (or Sentinel's master) is walked with SCAN … MATCH <prefix>* in steps of
// SCAN_COUNT. MATCH filters after the keys are read, so a walk costs the size of the whole
// keyspace: it stops after `maxScanned` keys examined and says it is incomplete rather than walk
// a large Redis for seconds. In a Redis Cluster a prefix that holds a whole hash tag lies in one
// slot (every limit key of a caller does: limits/state-keys.ts), and CLUSTER GETKEYSINSLOT on that
// slot's master reads that slot alone, up to `maxScanned` keys; a prefix without a hash tag is
// scanned on every master. While a slot migrates, keys already moved are missed until ioredis
// refreshes its slot map: a listing is a look, not a guarantee.
import calculateSlot from "cluster-key-slot";
import { Cluster, type Redis } from "ioredis";
import type { KeyListing, ListKeysBounds } from "../contract.js";
import type { Boundary } from "./boundary.js";
import type { Slots } from "./slots.js";

/** Keys examined per SCAN call: large enough to take few round trips, small enough to stay quick. */
const SCAN_COUNT = 1000;

/** MATCH's glob syntax (`*`, `?`, `[…]`, `\`) escaped: the text matches only itself. */
export function globEscape(text: string): string {
  return text.replace(/[*?[\]\\]/g, "\\$&");
}

/**
 * The slot of every key that starts with `prefix`, when the prefix holds a whole hash tag (the
 * first `{` and a `}` after it, with something between); undefined otherwise, since the keys
 * under it may hash anywhere.
 */
export function prefixSlot(prefix: string): number | undefined {
  const open = prefix.indexOf("{");
  if (open === -1) return undefined;
  const close = prefix.indexOf("}", open + 1);
  // `{}` is no hash tag: Redis hashes the whole key then.
  if (close === -1 || close === open + 1) return undefined;
  return calculateSlot(prefix.slice(0, close + 1));
}

/** The longest text every one of `texts` starts with. */
export function commonPrefix(texts: readonly string[]): string {
  let common = texts[0] ?? "";
  for (const t of texts) {
    let i = 0;
    while (i < common.length && i < t.length && common[i] === t[i]) i++;
    common = common.slice(0, i);
  }
  return common;
}

/** The keys found so far: each once (SCAN may return a key twice), at most `maxKeys`. */
class Found {
  private readonly keys = new Set<string>();
  complete = true;

  constructor(
    private readonly prefixes: readonly string[],
    private readonly maxKeys: number,
  ) {}

  /** False once the listing is full: the caller stops reading. */
  add(batch: readonly string[]): boolean {
    for (const key of batch) {
      if (this.keys.has(key) || !this.prefixes.some((p) => key.startsWith(p))) continue;
      if (this.keys.size >= this.maxKeys) {
        this.complete = false;
        return false;
      }
      this.keys.add(key);
    }
    return true;
  }

  listing(): KeyListing {
    return { keys: [...this.keys], complete: this.complete };
  }
}

export class KeyLister {
  constructor(
    private readonly client: Redis | Cluster,
    private readonly slots: Slots,
    private readonly boundary: Boundary,
  ) {}

  async list(prefixes: readonly string[], bounds: ListKeysBounds): Promise<KeyListing> {
    const found = new Found(prefixes, bounds.maxKeys);
    if (prefixes.length === 0) return found.listing();
    const client = this.client;
    if (!(client instanceof Cluster)) {
      await this.scan(client, prefixes, bounds.maxScanned, found);
      return found.listing();
    }
    const bySlot = new Map<number, string[]>();
    const untagged: string[] = [];
    for (const prefix of prefixes) {
      const slot = prefixSlot(prefix);
      if (slot === undefined) untagged.push(prefix);
      else bySlot.set(slot, [...(bySlot.get(slot) ?? []), prefix]);
    }
    const reads: Promise<void>[] = [...bySlot.keys()].map((slot) =>
      this.readSlot(client, slot, bounds.maxScanned, found),
    );
    if (untagged.length > 0) {
      for (const master of client.nodes("master"))
        reads.push(this.scan(master, untagged, bounds.maxScanned, found));
    }
    await Promise.all(reads);
    return found.listing();
  }

  /** SCAN one server from the start, until its end, a full listing or `maxScanned` keys examined. */
  private async scan(
    node: Redis,
    prefixes: readonly string[],
    maxScanned: number,
    found: Found,
  ): Promise<void> {
    const pattern = `${globEscape(commonPrefix(prefixes))}*`;
    let cursor = "0";
    let scanned = 0;
    do {
      const count = Math.min(SCAN_COUNT, maxScanned - scanned);
      const [next, keys] = await this.boundary.bounded(node.scan(cursor, "MATCH", pattern, "COUNT", count));
      scanned += count;
      cursor = next;
      if (!found.add(keys)) return;
    } while (cursor !== "0" && scanned < maxScanned);
    if (cursor !== "0") found.complete = false;
  }

  /** Up to `maxScanned` keys of one slot, read on the master the slot map names for it. */
  private async readSlot(cluster: Cluster, slot: number, maxScanned: number, found: Found): Promise<void> {
    const shard = this.slots.shardOfSlot(slot);
    const master = cluster.nodes("master").find((n) => `${n.options.host}:${n.options.port}` === shard);
    if (!master) throw this.boundary.toStoreError(new Error(`no master is known for slot ${slot} yet`));
    const keys = await this.boundary.bounded(master.cluster("GETKEYSINSLOT", slot, maxScanned));
    // A slot that filled the reply may hold more.
    if (keys.length >= maxScanned) found.complete = false;
    found.add(keys);
  }
}
