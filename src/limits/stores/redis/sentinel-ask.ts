// A question to every sentinel: which master do you name? One small connection per sentinel,
// opened on the first question (a store that never fails never opens them).
import { Redis } from "ioredis";
import { sentinelAddress } from "./connection.js";

export interface SentinelQuestion {
  /** "host:port" per sentinel, undefined where one did not answer within the timeout. */
  ask(): Promise<(string | undefined)[]>;
  close(): void;
}

export function askSentinels(
  sentinel: { name: string; nodes: readonly string[] },
  timeoutMs: number,
): SentinelQuestion {
  let clients: Redis[] | undefined;
  const open = () =>
    sentinel.nodes.map((node) => {
      const client = new Redis({
        ...sentinelAddress(node),
        // Queued until connected: the first question is asked on connections opened for it.
        // commandTimeout bounds the wait on a sentinel that is down.
        maxRetriesPerRequest: 0,
        commandTimeout: Math.max(100, timeoutMs),
        connectTimeout: Math.max(1000, timeoutMs * 10),
        retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 1000),
        disconnectTimeout: timeoutMs,
      });
      client.on("error", () => {});
      return client;
    });
  return {
    async ask() {
      clients ??= open();
      return Promise.all(
        clients.map((client) =>
          client.call("SENTINEL", "get-master-addr-by-name", sentinel.name).then(
            (reply) => (Array.isArray(reply) && reply.length === 2 ? `${reply[0]}:${reply[1]}` : undefined),
            () => undefined,
          ),
        ),
      );
    },
    close() {
      for (const client of clients ?? []) client.disconnect();
      clients = undefined;
    },
  };
}
