// While checks through Sentinel fail, ask the sentinels which master they name, and leave the
// one the client is on when most of them name another.
//
// The client leaves a master when the connection closes (a killed Redis) or when a sentinel
// publishes +switch-master naming another (switch-master.ts). Neither happens soon enough
// after a partition: the cut-off master's socket stays open, and the sentinel that led the
// failover publishes +switch-master only after it has reconfigured every other replica, about
// a second after it began naming the promoted one (measured in test/e2e/partition.test.ts: 1.4–1.9 s from the naming to the first
// decision, against 0.2 s after a kill). Asking is cheap and only happens while checks fail.
import { isIP } from "node:net";
import type { Redis } from "ioredis";

/** How often the sentinels are asked while checks fail. */
export const RECHECK_INTERVAL_MS = 200;

/**
 * The master to move to, or undefined to stay: an address other than `current` named by more
 * than half of the `sentinelCount` sentinels (a sentinel that did not answer counts against).
 * A sentinel naming a host name is compared by port as well as name, since the client's socket
 * knows only the address it resolved to: `current` is "ip:port".
 */
export function masterToMoveTo(
  current: string,
  named: readonly (string | undefined)[],
  sentinelCount: number,
): string | undefined {
  const votes = new Map<string, number>();
  for (const address of named) {
    if (address === undefined || sameMaster(address, current)) continue;
    votes.set(address, (votes.get(address) ?? 0) + 1);
  }
  for (const [address, count] of votes) if (count * 2 > sentinelCount) return address;
  return undefined;
}

function sameMaster(named: string, current: string): boolean {
  if (named === current) return true;
  const [host, port] = splitAddress(named);
  const [, currentPort] = splitAddress(current);
  // A host name cannot be matched against the socket's IP without resolving it: on the same
  // port it is taken for the same master, and leaving it is +switch-master's job as before.
  return isIP(host) === 0 && port === currentPort;
}

function splitAddress(address: string): [string, string] {
  const colon = address.lastIndexOf(":");
  return [address.slice(0, colon), address.slice(colon + 1)];
}

export interface SentinelRecheckOptions {
  /** The client on the master; reconnected (it asks the sentinels again) when told to move. */
  client: Redis;
  /** Asks the sentinels for the master's address ("host:port"), one answer per sentinel. */
  ask: () => Promise<(string | undefined)[]>;
  sentinelCount: number;
  /** The address the client is on now ("" before it first connected). */
  current: () => string;
  intervalMs?: number;
}

/**
 * Started by a failed check, stopped by a successful one: asks every `intervalMs` (one question
 * in flight at a time) and reconnects the client when the sentinels have moved on.
 */
export class SentinelRecheck {
  private timer: NodeJS.Timeout | undefined;
  private asking = false;
  private closed = false;

  constructor(private readonly options: SentinelRecheckOptions) {}

  /** A check failed: start asking, if not already. */
  failed(): void {
    if (this.timer !== undefined || this.closed) return;
    this.timer = setInterval(() => void this.askOnce(), this.options.intervalMs ?? RECHECK_INTERVAL_MS);
    this.timer.unref();
    void this.askOnce();
  }

  /** A check succeeded: the client is on a master that answers. */
  succeeded(): void {
    if (this.timer === undefined) return;
    clearInterval(this.timer);
    this.timer = undefined;
  }

  close(): void {
    this.closed = true;
    this.succeeded();
  }

  private async askOnce(): Promise<void> {
    if (this.asking) return;
    this.asking = true;
    try {
      // Only a client that is on a master can be stuck on the wrong one. One reconnecting
      // (after a kill, or after this very recheck) is already asking the sentinels: leaving
      // it again would abort that, and a reconnection slower than the interval (a busy
      // machine) never finished (every gateway degraded for good in bench:failover).
      if (this.options.client.status !== "ready") return;
      const current = this.options.current();
      if (current === "") return;
      const named = await this.options.ask();
      if (this.closed || this.timer === undefined || this.options.client.status !== "ready") return;
      if (this.options.current() !== current) return;
      if (masterToMoveTo(current, named, this.options.sentinelCount) === undefined) return;
      leaveMaster(this.options.client);
    } catch {
      // A sentinel that cannot be asked is asked again next time.
    } finally {
      this.asking = false;
    }
  }
}

/**
 * Reconnects through the sentinels; the "ready" that follows names the new master
 * (watchMaster). disconnect(true) ends the socket gracefully, which a cut-off master never
 * acknowledges: destroyed at once instead of disconnectTimeout later (0.55 s from the naming
 * to the first decision with it, 0.3 s without).
 */
export function leaveMaster(client: Redis): void {
  const stream = client.stream as { destroy?: () => void } | undefined;
  client.disconnect(true);
  stream?.destroy?.();
}
