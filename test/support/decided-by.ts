// What decided a request in the failover tests: the store ("store-200", "store-429"), the
// failure policy ("degraded-200", "degraded-503", by X-RateLimit-Degraded), or nothing at all
// ("socket-…"). Over-admission is counted in store-200s only.

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `test` every 20 ms (a throw counts as false); the ms it took, or throws after `timeoutMs`. */
export async function until(what: string, test: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    if (await test().catch(() => false)) return Date.now() - started;
    if (Date.now() - started > timeoutMs)
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(20);
  }
}

/** One request of the API key `key`, and what decided it. */
export async function ask(url: string, key: string): Promise<string> {
  try {
    const res = await fetch(`${url}/x`, { headers: { "x-api-key": key }, signal: AbortSignal.timeout(5000) });
    await res.arrayBuffer();
    return `${res.headers.get("x-ratelimit-degraded") === "true" ? "degraded" : "store"}-${res.status}`;
  } catch (err) {
    return `socket-${(err as Error).name}`;
  }
}

/** `n` requests one after another, tallied by what decided each. */
export async function askMany(url: string, key: string, n: number): Promise<Record<string, number>> {
  const tally: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const answer = await ask(url, key);
    tally[answer] = (tally[answer] ?? 0) + 1;
  }
  return tally;
}
