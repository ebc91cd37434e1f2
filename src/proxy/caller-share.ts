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
// Counted from when the request is forwarded (proxy/pipeline.ts) to the response's 'close', which
// Node raises once for every response however it ends: a request waiting on the limit store holds
// no connection, and a burst is counted one request at a time.

export class CallerShares {
  private readonly held = new Map<string, number>();
  /** Everything in flight per upstream, every caller's. */
  private readonly total = new Map<string, number>();

  /**
   * Takes a slot on `upstream` (of `capacity` connections) for `caller`: always while it holds
   * fewer than `share`, and past that only while more than a share of the pool would stay free
   * for the other callers, so a lone caller is not refused a pool nobody else wants. False: the
   * request is refused. A true answer is matched by one release().
   */
  acquire(upstream: string, caller: string, share: number, capacity: number): boolean {
    const key = `${upstream}\0${caller}`;
    const count = this.held.get(key) ?? 0;
    const all = this.total.get(upstream) ?? 0;
    // A share of the whole pool keeps nothing back: every request may queue for a connection.
    if (share < capacity && count >= share && all >= capacity - share) return false;
    this.held.set(key, count + 1);
    this.total.set(upstream, all + 1);
    return true;
  }

  release(upstream: string, caller: string): void {
    const key = `${upstream}\0${caller}`;
    const count = this.held.get(key);
    if (count === undefined) return;
    // An entry per caller with something in flight, never one per caller ever seen.
    if (count <= 1) this.held.delete(key);
    else this.held.set(key, count - 1);
    const all = this.total.get(upstream) ?? 1;
    if (all <= 1) this.total.delete(upstream);
    else this.total.set(upstream, all - 1);
  }

  /** What `caller` holds on `upstream` now. */
  holding(upstream: string, caller: string): number {
    return this.held.get(`${upstream}\0${caller}`) ?? 0;
  }

  /** Callers with anything in flight (the table's size). */
  get size(): number {
    return this.held.size;
  }
}
