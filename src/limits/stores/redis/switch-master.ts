// The sentinels' +switch-master, heard on a subscription of our own, and acted on only when it
// names a master other than the one the client is on.
//
// ioredis' failoverDetector reconnects on every +switch-master, wherever the client is. After
// a kill the client has usually found the promoted replica already (its reconnection asks the
// sentinels), and the sentinel publishes +switch-master only once it has reconfigured the other
// replicas, about a second later: the detector then dropped a good connection, and requests in
// the ~0.1 s it took to come back were degraded (seen in test/e2e/partition.test.ts). Acting
// only on a switch to elsewhere keeps what the detector was for: a graceful failover (SENTINEL
// FAILOVER, the old master demoted but still answering) is left at once, not at the first
// failed check.
import { Redis } from "ioredis";
import { sentinelAddress } from "./connection.js";

export const SWITCH_MASTER_CHANNEL = "+switch-master";

/**
 * The new master's "ip:port" if `message` (`<name> <old-ip> <old-port> <new-ip> <new-port>`)
 * is about `name`, undefined otherwise or when malformed.
 */
export function switchedTo(name: string, message: string): string | undefined {
  const parts = message.split(" ");
  if (parts.length !== 5 || parts[0] !== name) return undefined;
  const [, , , host, port] = parts;
  if (!host || !/^\d+$/.test(port!)) return undefined;
  return `${host}:${port}`;
}

export interface SwitchMasterWatch {
  close(): void;
}

/** Subscribes to every sentinel; `onSwitch` gets each new master's address for `name`. */
export function watchSwitchMaster(
  sentinel: { name: string; nodes: readonly string[] },
  timeoutMs: number,
  onSwitch: (address: string) => void,
): SwitchMasterWatch {
  const clients = sentinel.nodes.map((node) => {
    const client = new Redis({
      ...sentinelAddress(node),
      maxRetriesPerRequest: 0,
      connectTimeout: Math.max(1000, timeoutMs * 10),
      // A sentinel that restarts is subscribed to again (ioredis resubscribes on reconnect).
      retryStrategy: (times) => Math.min(50 * 2 ** Math.min(times, 6), 1000),
      disconnectTimeout: timeoutMs,
    });
    client.on("error", () => {});
    client.on("message", (channel: string, message: string) => {
      if (channel !== SWITCH_MASTER_CHANNEL) return;
      const address = switchedTo(sentinel.name, message);
      if (address !== undefined) onSwitch(address);
    });
    client.subscribe(SWITCH_MASTER_CHANNEL).catch(() => {});
    return client;
  });
  return {
    close() {
      for (const client of clients) client.disconnect();
    },
  };
}
