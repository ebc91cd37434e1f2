// The client: an ioredis connection to a single Redis, a Redis Cluster or a master found through
// Sentinel, and the wait until it can answer. Nothing here knows about limits.
//
// ioredis is set to fail fast: no offline queue and no per-request retries, so a dead Redis turns
// into an immediate rejection that the failure policy answers, never a request parked in a queue.
// Reconnection happens in the background with a capped backoff.
import { Cluster, Redis, type RedisOptions } from "ioredis";

export interface ConnectionOptions {
  /** A single Redis (redis:// or rediss://). Exactly one of url, cluster and sentinel. */
  url?: string;
  /** Redis Cluster seed nodes (redis://host:port). */
  cluster?: readonly string[];
  /** Redis Sentinel: the master's name and sentinel nodes (host:port). */
  sentinel?: { name: string; nodes: readonly string[] };
  /** Upper bound on one check, in ms (SPEC `store.timeout`). */
  timeoutMs: number;
  /** Called for connection-level errors (logged by the server, rate-limited there). */
  onError?: (err: Error) => void;
  /** Extra ioredis options, for tests. */
  redisOptions?: Partial<RedisOptions>;
}

/**
 * Reconnect attempts back off from 50 ms to this cap. Low, because the time Redis is back but
 * tollgate is not yet connected is time every check is degraded; one connect attempt per
 * half-second against a dead Redis costs nothing.
 */
export const MAX_RECONNECT_DELAY_MS = 500;

/** The script the batcher coalesces itself: auto-pipelining it would only add work. */
export const CHECK_COMMAND = "tollgateCheck";

/** Connects to the store's Redis, of whichever topology; the caller closes it (`disconnect`). */
export function connect(options: ConnectionOptions): Redis | Cluster {
  const redisOptions: RedisOptions = {
    enableAutoPipelining: true,
    // Checks are coalesced by the store itself (one batch per slot in flight); wrapping each
    // batch in an auto-pipeline of one command only adds work.
    autoPipeliningIgnoredCommands: [CHECK_COMMAND],
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    // The store's own deadlines decide (they are judged after the replies already read, see
    // deadline.ts); ioredis' timer, which fires before them, only reclaims commands a hung
    // Redis never answers.
    commandTimeout: Math.max(1000, 3 * options.timeoutMs),
    connectTimeout: Math.max(1000, options.timeoutMs * 10),
    // Leaving a connection ends it gracefully and destroys it only this long after, unless the
    // peer closes first. A master cut off by a partition never answers the FIN: with ioredis'
    // 2 s default a Sentinel switch away from it waited 2 s before asking for the new master
    // (1.5–2.0 s from the naming to the first decision, measured in test/e2e/partition.test.ts).
    // No reply that late could be used: a check's deadline is timeoutMs.
    disconnectTimeout: options.timeoutMs,
    // Reconnect forever, quickly at first, never slower than every MAX_RECONNECT_DELAY_MS.
    retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), MAX_RECONNECT_DELAY_MS),
    ...options.redisOptions,
  };
  const client = options.cluster
    ? connectCluster(options.cluster, redisOptions)
    : options.sentinel
      ? new Redis({
          ...redisOptions,
          // ioredis' own detector reconnects on every +switch-master, even when already on the
          // new master: the store watches +switch-master itself (switch-master.ts), and a
          // master that stops answering is left by sentinel-recheck.ts.
          failoverDetector: false,
          name: options.sentinel.name,
          sentinels: options.sentinel.nodes.map(sentinelAddress),
        })
      : new Redis(options.url ?? "redis://127.0.0.1:6379", redisOptions);
  client.on("error", (err: Error) => options.onError?.(err));
  return client;
}

/** A sentinel node as store.sentinel.nodes writes it (`host:port`, `redis://` optional). */
export function sentinelAddress(node: string): { host: string; port: number } {
  const [host, port] = node.replace(/^redis:\/\//, "").split(":");
  return { host: host!, port: Number(port ?? 26379) };
}

function connectCluster(urls: readonly string[], redisOptions: RedisOptions): Cluster {
  const seeds = urls.map((u) => {
    const url = new URL(u);
    return { host: url.hostname, port: Number(url.port || 6379) };
  });
  const first = new URL(urls[0]!);
  const cluster = new Cluster(seeds, {
    // ioredis groups auto-pipelined scripts by their first argument (the key count), not
    // their first key, and then refuses the mixed-slot pipeline (redis/ioredis#2109). The
    // store batches checks per slot itself, so nothing is lost by turning it off.
    enableAutoPipelining: false,
    enableOfflineQueue: false,
    // MOVED and ASK are followed by ioredis; the store's deadline bounds the whole check.
    // While a slot migrates, a check naming a key already moved and one not yet created
    // (the denial log) gets TRYAGAIN, which ioredis retries every 100 ms (its default).
    retryDelayOnFailover: 50,
    retryDelayOnClusterDown: 50,
    clusterRetryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), MAX_RECONNECT_DELAY_MS),
    redisOptions: {
      ...redisOptions,
      enableAutoPipelining: false,
      password: first.password ? decodeURIComponent(first.password) : undefined,
      username: first.username ? decodeURIComponent(first.username) : undefined,
      tls: first.protocol === "rediss:" ? {} : undefined,
    },
  });
  // ioredis creates a cluster's node connections lazily and queues commands on them until
  // they are ready (whatever enableOfflineQueue says for the cluster). The first checks
  // for each master then waited for a TCP connect and a ready check, each a turn of an
  // event loop that a burst of requests keeps busy: 400–900 ms measured under load, past
  // the store timeout, which counted against that master's breaker. Connecting each node
  // as soon as the slot map names it moves that wait out of the requests' way.
  cluster.on("+node", (node: Redis) => {
    if (node.status === "wait") node.connect().catch(() => {});
  });
  return cluster;
}

/**
 * Calls `onMaster` with host:port each time the client is ready on a server: through Sentinel,
 * the master the sentinels named. A failover shows as a new address.
 */
export function watchMaster(client: Redis, onMaster: (address: string) => void): void {
  client.on("ready", () => {
    const stream = (client as unknown as { stream?: { remoteAddress?: string; remotePort?: number } }).stream;
    if (stream?.remoteAddress && stream.remotePort) onMaster(`${stream.remoteAddress}:${stream.remotePort}`);
  });
}

/** Whether the client is believed connected right now, without a round trip. */
export function isReady(client: Redis | Cluster): boolean {
  return client.status === "ready";
}

/**
 * Resolves true once connected, or false after `timeoutMs`. Start-up waits on it briefly so
 * the first requests are not degraded by a connection still being set up; it never blocks on
 * a Redis that is down.
 */
export async function waitUntilReady(client: Redis | Cluster, timeoutMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  const ready =
    isReady(client) ||
    (await new Promise<boolean>((resolve) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        client.off("ready", onReady);
        resolve(ok);
      };
      const onReady = () => done(true);
      const timer = setTimeout(() => done(false), timeoutMs);
      client.once("ready", onReady);
    }));
  if (!ready || !(client instanceof Cluster)) return ready;
  // A cluster is "ready" once the slot map is known; its masters are connected apart (see
  // connectCluster). Wait for them too, within what is left, so that the first requests do
  // not pay for it; a master that does not come up in time is the breaker's business.
  const masters = client.nodes("master");
  await Promise.race([
    Promise.all(masters.map((node) => node.ping().catch(() => undefined))),
    new Promise((r) => setTimeout(r, Math.max(0, until - Date.now())).unref()),
  ]);
  return true;
}
