// What one caller holds of an upstream's connections on this instance. Each request in flight to
// an upstream holds one of its pooled connections (one request per connection, see upstreams.ts)
// from when it is sent on until its answer ends, its body included; HTTP/2 lets a client hold a
// hundred of them over one TCP connection. An outside attack did: one key opened 300 streams with
// bodies it never finished, took the 128-connection pool, and every other caller's request
// waited for the route's timeout. Limits bound how often a caller may ask, not how long it holds
// what it got; this bounds the holding, in memory, per instance, for every caller alike.
//
// A caller always gets its share. Past it, it may take more only while more than a share of the
// pool would stay free for the rest, so a lone caller is refused nothing a pool nobody else wants
// can give, and a caller holding most of it cannot take the last share from others.
//
// Counted from when the request is forwarded (proxy/pipeline.ts) to the end of its exchange
// (respond.ts's complete, which every request reaches once however it ends): a request waiting
// on the limit store holds no connection, and a burst is counted one request at a time.

/** Who holds a share: a client by its id, an anonymous caller by its address (apart: an id may look like one). */
export type ShareHolder = { kind: "client"; id: string } | { kind: "anonymous"; ipKey: string };

interface UpstreamShares {
  /** Everything in flight to the upstream, every caller's. */
  total: number;
  clients: Map<string, number>;
  addresses: Map<string, number>;
}

export class CallerShares {
  // By upstream, then by the caller's own string (an id or an address, which the request already
  // holds): no key is built per request, the hot path's only cost is a few map operations.
  private readonly upstreams = new Map<string, UpstreamShares>();

  /**
   * Takes a slot on `upstream` (of `capacity` connections) for `caller`: always while it holds
   * fewer than `share`, and past that only while more than a share of the pool would stay free
   * for the other callers, so a lone caller is not refused a pool nobody else wants. False: the
   * request is refused. A true answer is matched by one release().
   */
  acquire(upstream: string, caller: ShareHolder, share: number, capacity: number): boolean {
    let shares = this.upstreams.get(upstream);
    if (!shares) {
      shares = { total: 0, clients: new Map(), addresses: new Map() };
      this.upstreams.set(upstream, shares);
    }
    const map = caller.kind === "client" ? shares.clients : shares.addresses;
    const key = caller.kind === "client" ? caller.id : caller.ipKey;
    const count = map.get(key) ?? 0;
    // A share of the whole pool keeps nothing back: every request may queue for a connection.
    if (share < capacity && count >= share && shares.total >= capacity - share) return false;
    map.set(key, count + 1);
    shares.total++;
    return true;
  }

  release(upstream: string, caller: ShareHolder): void {
    const shares = this.upstreams.get(upstream);
    if (!shares) return;
    const map = caller.kind === "client" ? shares.clients : shares.addresses;
    const key = caller.kind === "client" ? caller.id : caller.ipKey;
    const count = map.get(key);
    if (count === undefined) return;
    // An entry per caller with something in flight, never one per caller ever seen.
    if (count <= 1) map.delete(key);
    else map.set(key, count - 1);
    shares.total--;
    if (shares.total === 0) this.upstreams.delete(upstream);
  }

  /** What `caller` holds on `upstream` now. */
  holding(upstream: string, caller: ShareHolder): number {
    const shares = this.upstreams.get(upstream);
    if (!shares) return 0;
    const map = caller.kind === "client" ? shares.clients : shares.addresses;
    return map.get(caller.kind === "client" ? caller.id : caller.ipKey) ?? 0;
  }

  /** Callers with anything in flight, on every upstream (the table's size). */
  get size(): number {
    let n = 0;
    for (const shares of this.upstreams.values()) n += shares.clients.size + shares.addresses.size;
    return n;
  }
}
