// How much of AI request bodies this process holds while it reads and parses them, in all and
// per caller. An AI route reads a body whole before any limit is asked (the body says what the
// request may cost), so without a bound one caller's refused requests could make the gateway
// hold gigabytes at once (found by an attack: sixty 4 MB bodies ran a gateway out of memory,
// a hundred HTTP/2 streams on one connection the same). Each byte read is counted twice (the
// bytes and their decoded text) from the moment it arrives, and each JSON value PER_VALUE bytes
// (what parsing builds) before it is parsed, until the request is forwarded or answered.
//
// Past the total, a new body is refused with 503 (the gateway is busy, retry in a moment); past
// one caller's share, with 429 (that caller sends too much at once). A caller is sure of
// BODY_MEMORY_SURE; past it, only while a reserve stays free for the rest, as caller_share
// keeps part of an upstream's pool. Both bounds are per process:
// `workers: auto` multiplies them by the workers.

/** What all AI bodies being read may hold, in counted bytes (256 MiB). */
export const BODY_MEMORY_TOTAL = 256 * 1024 * 1024;
/** What one caller's AI bodies being read may hold, in counted bytes (64 MiB: four 4 MB bodies at once). */
export const BODY_MEMORY_PER_CALLER = 64 * 1024 * 1024;
/**
 * What one caller is sure of (16 MiB: a 4 MB body and then some); past it, a caller may take more
 * only while BODY_MEMORY_RESERVE stays free for the others. Without it four callers at their
 * 64 MiB held the whole pool and every other caller's body was a 503.
 */
export const BODY_MEMORY_SURE = 16 * 1024 * 1024;
/** Kept free for callers within their sure share while any caller is past its own. */
export const BODY_MEMORY_RESERVE = 64 * 1024 * 1024;
/** Each byte read is counted this many times (see above). */
export const BODY_MEMORY_WEIGHT = 2;
/** What one parsed JSON value costs the heap, about (an object or array with its slot). */
export const BODY_MEMORY_PER_VALUE = 80;

export type BodyMemoryRefusal = "gateway" | "caller";

export class BodyMemory {
  private held = 0;
  private readonly byCaller = new Map<string, number>();

  constructor(
    readonly total = BODY_MEMORY_TOTAL,
    readonly perCaller = BODY_MEMORY_PER_CALLER,
    readonly sure = Math.min(BODY_MEMORY_SURE, perCaller),
    readonly reserve = Math.min(BODY_MEMORY_RESERVE, total / 4),
  ) {}

  /** Counted bytes held now (tests and metrics). */
  get size(): number {
    return this.held;
  }

  /** Takes `counted` bytes for `caller`, or says whose bound it would pass (nothing is taken then). */
  take(caller: string, counted: number): BodyMemoryRefusal | undefined {
    const mine = this.byCaller.get(caller) ?? 0;
    if (mine + counted > this.perCaller) return "caller";
    if (this.held + counted > this.total) return "gateway";
    if (mine + counted > this.sure && this.total - (this.held + counted) < this.reserve) return "caller";
    this.held += counted;
    this.byCaller.set(caller, mine + counted);
    return undefined;
  }

  /** Gives back `counted` bytes taken for `caller`. */
  give(caller: string, counted: number): void {
    this.held = Math.max(0, this.held - counted);
    const left = (this.byCaller.get(caller) ?? 0) - counted;
    if (left > 0) this.byCaller.set(caller, left);
    else this.byCaller.delete(caller);
  }
}
