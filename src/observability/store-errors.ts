// Store failures in an operator's words: what is wrong, at which address. The Redis client's own
// text ("Stream isn't writeable and enableOfflineQueue options is false") names its options,
// not the problem, so it never reaches /readyz or an admin answer; neither do credentials (the
// address is host:port, read from the URL without its user and password).
import {
  BreakerOpenError,
  StoreConnectionError,
  StoreReplicationError,
  StoreReplyError,
  StoreTimeoutError,
  StoreUnavailableError,
} from "../errors.js";

/** host:port of a redis:// URL (or a bare host:port), without user or password. */
export function hostPort(address: string, defaultPort = 6379): string {
  try {
    const url = new URL(address.includes("://") ? address : `redis://${address}`);
    return `${url.hostname}:${url.port || defaultPort}`;
  } catch {
    return "an address that is not a URL";
  }
}

/** Where the store is: `host:port`, a cluster's seed nodes, or the sentinels; "memory" in-process. */
export function storeAddress(store: {
  url: string;
  cluster?: readonly string[] | undefined;
  sentinel?: { name: string; nodes: readonly string[] } | undefined;
}): string {
  if (store.url.startsWith("memory:")) return "memory";
  if (store.cluster?.length) return store.cluster.map((u) => hostPort(u)).join(", ");
  if (store.sentinel) {
    const nodes = store.sentinel.nodes.map((n) => hostPort(n, 26379)).join(", ");
    return `${nodes} (sentinels of "${store.sentinel.name}")`;
  }
  return hostPort(store.url);
}

/** Socket error codes, as an operator reads them. */
const SOCKET_CODES: Record<string, string> = {
  ECONNREFUSED: "connection refused",
  ETIMEDOUT: "connection timed out",
  ECONNRESET: "connection reset",
  ECONNABORTED: "connection aborted",
  EPIPE: "connection closed",
  ENOTFOUND: "host not found",
  EAI_AGAIN: "host name lookup failed",
  EHOSTUNREACH: "host unreachable",
  ENETUNREACH: "network unreachable",
  EADDRNOTAVAIL: "address not available",
};

/** Redis error codes (the first word of its error replies), as an operator reads them. */
const REDIS_CODES: Record<string, string> = {
  WRONGPASS: "authentication failed: wrong user name or password in the store URL",
  NOAUTH: "authentication required: the store URL has no password",
  NOPERM: "the Redis user lacks a permission the gateway needs",
  LOADING: "Redis is loading its dataset",
  READONLY: "it is a read-only replica: the store URL must name the master",
  OOM: "Redis is out of memory (maxmemory)",
  MISCONF: "Redis cannot persist to disk (MISCONF)",
  BUSY: "Redis is busy running a script",
  CLUSTERDOWN: "the cluster is down",
  MASTERDOWN: "the master is down",
  TRYAGAIN: "a slot is being migrated",
  NOREPLICAS: "the master has fewer good replicas than its min-replicas-to-write and refuses writes",
};
const REDIS_CODE_RE = new RegExp(`\\b(${Object.keys(REDIS_CODES).join("|")})\\b`);

/** The client's ways of saying "not connected", which say nothing about why. */
const NOT_CONNECTED_RE =
  /enableOfflineQueue|Connection is closed|isn't ready|None of startup nodes|Failed to refresh slots cache|max retries per request/i;

type ErrorLike = { name?: string; message?: string; code?: unknown; cause?: unknown };

/** Why a connection attempt failed, from the error the client reported, or undefined. */
function connectionCause(err: ErrorLike): string | undefined {
  const code = typeof err.code === "string" ? err.code : undefined;
  if (code && SOCKET_CODES[code]) return SOCKET_CODES[code];
  const redis = REDIS_CODE_RE.exec(err.message ?? "")?.[1];
  if (redis) return REDIS_CODES[redis];
  if (code && /TLS|CERT|SSL|SELF_SIGNED|UNABLE_TO_VERIFY/.test(code)) return `TLS handshake failed: ${code}`;
  if (/All sentinels are unreachable/i.test(err.message ?? "")) return "no sentinel answers";
  if (code && /^E[A-Z]+$/.test(code)) return code;
  return undefined;
}

/**
 * Describes store failures. The client reports why connecting failed on its own (error events,
 * given to `connectionFailed`); a command refused while not connected only says that it is not,
 * so its description takes the cause from the last connection failure.
 */
export class StoreErrors {
  private lastCause: string | undefined;

  /** `address`: storeAddress() of the store's config. */
  constructor(readonly address: string) {}

  /** A connection-level error the client reported (its "error" event). */
  connectionFailed(err: Error): void {
    this.lastCause = connectionCause(err) ?? this.lastCause;
  }

  /** The client is connected again: earlier failures no longer explain anything. */
  connected(): void {
    this.lastCause = undefined;
  }

  describe(err: unknown): string {
    const at = this.address;
    if (err instanceof StoreUnavailableError) return this.describe(err.cause);
    // The Redis adapter wraps its client's errors (a LOADING reply, a broken socket): the
    // client's own error says more to an operator than the wrapper.
    if ((err instanceof StoreConnectionError || err instanceof StoreReplyError) && err.cause !== undefined)
      return this.describe(err.cause);
    if (err instanceof StoreTimeoutError) return `limit store at ${at} did not answer within ${err.ms} ms`;
    if (err instanceof StoreReplicationError)
      return `limit store at ${at}: ${err.acknowledged} of the ${err.wanted} replicas store.replicas asks for held the check's writes within ${err.waitMs} ms (see INFO replication on the master)`;
    if (err instanceof BreakerOpenError)
      return `limit store at ${at} is not asked: its circuit breaker is open after failed checks`;
    if (err instanceof StoreReplyError)
      return `limit store at ${at} answered the limit script with a reply the gateway cannot read`;
    const e = (err ?? {}) as ErrorLike;
    const message = e.message ?? "";
    if (/Command timed out/i.test(message)) return `limit store at ${at} did not answer in time`;
    if (e.name === "ReplyError") {
      const code = /^([A-Z]+)\b/.exec(message)?.[1];
      const what = code
        ? (REDIS_CODES[code] ?? `Redis answered with the error ${code}`)
        : "Redis answered with an error";
      return `limit store at ${at} refused the command: ${what}`;
    }
    const cause = connectionCause(e);
    if (cause) return `limit store unreachable at ${at} (${cause})`;
    if (NOT_CONNECTED_RE.test(message))
      return `limit store unreachable at ${at} (${this.lastCause ?? "not connected yet"})`;
    return `limit store at ${at} failed (${e.name && e.name !== "Error" ? e.name : "unexpected error"}; see the gateway's log)`;
  }
}
