// Settings a running gateway cannot change in place: its listeners, its store connection and
// its trace exporter (started once, before the first request, and flushed at exit).
// A reload keeps their current values and reports them, so the new config is never applied by
// halves (a new prefix with the old store, say).
import type { Config } from "./schema.js";

/** The store connection and key layout; `on_failure` and `local_fraction` apply live. */
const STORE_RESTART_ONLY = [
  "url",
  "cluster",
  "sentinel",
  "prefix",
  "timeout",
  "breaker",
  "replicas",
] as const;

export interface RestartSplit {
  /** The config to run: the new file, with restart-only settings kept as they are. */
  config: Config;
  /** Dotted names of restart-only settings that differ in the new file. */
  restartRequired: string[];
}

export function splitRestartOnly(current: Config, next: Config): RestartSplit {
  const restartRequired: string[] = [];
  const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);
  // The listener's address and whether it speaks TLS need a new socket; its certificate files
  // do not (a reload serves the new pair on new connections).
  const sameListener = same(listenerShape(current.listen), listenerShape(next.listen));
  if (!sameListener) restartRequired.push("listen");
  if (!same(current.admin.listen, next.admin.listen)) restartRequired.push("admin.listen");
  if (!same(current.workers, next.workers)) restartRequired.push("workers");
  if (!same(current.telemetry, next.telemetry)) restartRequired.push("telemetry");
  // The rate-limit service's socket: whether it is served, and where. Its files apply live.
  const sameRls = same(current.rls?.listen, next.rls?.listen);
  if (!sameRls) restartRequired.push("rls.listen");
  const store = { ...next.store };
  for (const key of STORE_RESTART_ONLY) {
    if (same(current.store[key], next.store[key])) continue;
    restartRequired.push(`store.${key}`);
    (store as Record<string, unknown>)[key] = current.store[key];
  }
  return {
    config: {
      ...next,
      listen: sameListener ? next.listen : current.listen,
      workers: current.workers,
      telemetry: current.telemetry,
      ...(sameRls ? {} : rlsKeptAt(current, next)),
      admin: { ...next.admin, listen: current.admin.listen },
      store,
    },
    restartRequired,
  };
}

function listenerShape(listen: Config["listen"]): { address: string; tls: boolean } {
  return typeof listen === "string"
    ? { address: listen, tls: false }
    : { address: listen.address, tls: listen.tls !== undefined };
}

/**
 * A reload that moves, adds or removes the rate-limit service keeps the running listener's
 * address (or its absence); the rest of the new `rls` applies.
 */
function rlsKeptAt(current: Config, next: Config): Pick<Config, "rls"> {
  if (current.rls === undefined || next.rls === undefined) return { rls: current.rls };
  return { rls: { ...next.rls, listen: current.rls.listen } };
}
