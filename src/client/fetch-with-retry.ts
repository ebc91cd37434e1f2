// fetchWithRetry: a fetch for callers of a rate-limited API. It retries 429 and 503 when the
// server says when (Retry-After as seconds or an HTTP date, or the RateLimit headers), and
// otherwise backs off exponentially with full jitter. It retries only methods that are safe to
// repeat unless told otherwise, never more than `maxAttempts` times or past `maxElapsedMs`, never
// sooner than `minDelayMs`, and stops waiting the moment the caller's AbortSignal fires.
// It imports nothing and uses nothing Node-specific: it runs in Node 20+ and in browsers.

export interface RetryOptions {
  /** Attempts in all, the first included (default 4). */
  maxAttempts?: number;
  /** No retry starts after this long from the first attempt, in ms (default 60 000). */
  maxElapsedMs?: number;
  /** First backoff step when the server gives no hint, in ms (default 500). */
  baseDelayMs?: number;
  /** Longest single wait, in ms (default 30 000): a longer hint ends the retries instead. */
  maxDelayMs?: number;
  /** Shortest wait, whatever the server says, in ms (default 100): never a tight loop. */
  minDelayMs?: number;
  /** Statuses worth retrying (default 429 and 503). */
  retryOn?: readonly number[];
  /** Retry POST, PATCH and other non-idempotent methods too (default false). */
  retryNonIdempotent?: boolean;
  /** Called before each wait; `delayMs` is how long it will wait. */
  onRetry?: (info: { attempt: number; delayMs: number; status?: number; error?: unknown }) => void;
  /** The fetch to use (default globalThis.fetch). */
  fetch?: typeof fetch;
  /** Source of jitter in [0, 1) (default Math.random); tests make it deterministic. */
  random?: () => number;
}

const IDEMPOTENT = new Set(["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"]);

/**
 * How long the server asks the caller to wait, in ms, or undefined when it does not say:
 * Retry-After (delta-seconds or HTTP date) first, then the IETF `RateLimit` field (the largest
 * `t` among exhausted limits), then the draft `RateLimit-Reset` when `RateLimit-Remaining` is 0.
 */
export function serverDelayMs(headers: Headers, nowMs: number = Date.now()): number | undefined {
  const retryAfter = headers.get("retry-after")?.trim();
  if (retryAfter) {
    if (/^\d+$/.test(retryAfter)) return Number(retryAfter) * 1000;
    const at = Date.parse(retryAfter);
    if (!Number.isNaN(at)) return Math.max(0, at - nowMs);
  }
  const ietf = headers.get("ratelimit");
  if (ietf) {
    let wait: number | undefined;
    for (const item of ietf.split(",")) {
      const r = /;\s*r=(\d+)/.exec(item);
      const t = /;\s*t=(\d+)/.exec(item);
      if (r && t && Number(r[1]) === 0) wait = Math.max(wait ?? 0, Number(t[1]) * 1000);
    }
    if (wait !== undefined) return wait;
  }
  const reset = headers.get("ratelimit-reset");
  if (reset && /^\d+$/.test(reset.trim()) && headers.get("ratelimit-remaining")?.trim() === "0") {
    return Number(reset) * 1000;
  }
  return undefined;
}

/** Full jitter (AWS architecture blog): a uniform wait in [0, min(max, base × 2^(attempt-1))]. */
export function backoffDelayMs(attempt: number, baseMs: number, maxMs: number, random: () => number): number {
  return random() * Math.min(maxMs, baseMs * 2 ** (attempt - 1));
}

export async function fetchWithRetry(
  input: string | URL | Request,
  init: RequestInit = {},
  options: RetryOptions = {},
): Promise<Response> {
  const {
    maxAttempts = 4,
    maxElapsedMs = 60_000,
    baseDelayMs = 500,
    maxDelayMs = 30_000,
    minDelayMs = 100,
    retryOn = [429, 503],
    retryNonIdempotent = false,
    onRetry,
    random = Math.random,
  } = options;
  const doFetch = options.fetch ?? globalThis.fetch;
  const method = (init.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
  // A streamed body cannot be sent twice.
  const replayable = !(init.body instanceof ReadableStream);
  const mayRetry = replayable && (retryNonIdempotent || IDEMPOTENT.has(method));
  const signal = init.signal ?? undefined;
  const started = Date.now();

  for (let attempt = 1; ; attempt++) {
    signal?.throwIfAborted();
    let response: Response | undefined;
    let error: unknown;
    try {
      response = await doFetch(input instanceof Request ? input.clone() : input, init);
    } catch (err) {
      if (signal?.aborted) throw err;
      error = err;
    }
    const retryable = response ? retryOn.includes(response.status) : true;
    if (!retryable || !mayRetry || attempt >= maxAttempts) {
      if (response) return response;
      throw error;
    }
    const hinted = response ? serverDelayMs(response.headers) : undefined;
    if (hinted !== undefined && hinted > maxDelayMs) {
      // The server wants a longer wait than this caller will make: let it decide what to do.
      if (response) return response;
    }
    const delayMs = Math.max(minDelayMs, hinted ?? backoffDelayMs(attempt, baseDelayMs, maxDelayMs, random));
    if (Date.now() + delayMs - started > maxElapsedMs) {
      if (response) return response;
      throw error;
    }
    // The body of a response we drop is not read: release it.
    await response?.body?.cancel().catch(() => {});
    onRetry?.({ attempt, delayMs, status: response?.status, error });
    await sleep(delayMs, signal);
  }
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
