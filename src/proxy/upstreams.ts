// Each upstream's targets (upstream/group.ts), one undici Pool per target. They outlive
// runtimes: a reload keeps an unchanged upstream whole (pools, health, balancer, retry budget);
// a changed one is rebuilt around the targets it keeps, which keep their pool and health; pools
// of targets that are gone are closed (drained, not cut), and removed upstreams' health checks
// stop.
import type { Logger } from "pino";
import { Pool } from "undici";
import type { CompiledUpstream } from "../config/compile.js";
import { tlsConnectOptions } from "../config/upstream-tls.js";
import type { Metrics } from "../observability/metrics.js";
import type { HealthCheckSettings } from "../upstream/active-health.js";
import { type GroupEvent, type TargetSpec, UpstreamGroup } from "../upstream/group.js";

export type UpstreamTargets = UpstreamGroup<Pool>;
export type Target = UpstreamTargets["targets"][number];

export interface UpstreamPoolsDeps {
  logger?: Logger | undefined;
  metrics?: Metrics | undefined;
  /** Monotonic ms (health back-offs, the retry budget). */
  clock?: (() => number) | undefined;
}

/** A target as /admin/health shows it; `by`, `reason` and `sinceMs` only while it is ejected. */
export interface UpstreamTargetState {
  upstream: string;
  target: string;
  ejected: boolean;
  by?: "requests" | "health_check";
  reason?: string;
  sinceMs?: number;
}

export class UpstreamPools {
  /** The last ejection of each target ("upstream origin"), until it returns. */
  private readonly ejections = new Map<
    string,
    { by: "requests" | "health_check"; reason: string; sinceMs: number }
  >();
  private readonly groups = new Map<string, { key: string; group: UpstreamTargets }>();
  private readonly clock: () => number;

  constructor(private readonly deps: UpstreamPoolsDeps = {}) {
    this.clock = deps.clock ?? (() => performance.now());
    deps.metrics?.watchUpstreamTargets(() => this.counts());
  }

  /**
   * The upstream's targets. A request of an older generation whose upstream has changed since
   * gets the current targets of that name: the config says they are where it lives now.
   */
  get(upstream: CompiledUpstream): UpstreamTargets {
    const existing = this.groups.get(upstream.name);
    if (existing) return existing.group;
    // Not built by retain() (a request of a generation whose upstream is gone, or a test
    // without a gateway): built now, without health checks; the next retain() drops it.
    return this.build(upstream, undefined);
  }

  /**
   * At start and after each reload: builds what `upstreams` has and this lacks, rebuilds what
   * changed, drops what is gone. Unchanged upstreams keep everything.
   */
  retain(upstreams: ReadonlyMap<string, CompiledUpstream>): void {
    const previous = new Map(this.groups);
    this.groups.clear();
    for (const upstream of upstreams.values()) {
      const old = previous.get(upstream.name);
      if (old?.key === upstream.poolKey) {
        previous.delete(upstream.name);
        this.groups.set(upstream.name, old);
        old.group.start();
        continue;
      }
      this.build(upstream, old?.group).start();
    }
    // Replaced or removed: their checks stop, and the pools no successor adopted are drained.
    for (const [name, old] of previous) {
      old.group.stop();
      const successor = this.groups.get(name)?.group;
      for (const target of old.group.targets)
        if (!successor?.targets.includes(target)) void target.dispatcher.close().catch(() => {});
    }
  }

  /** Healthy and ejected targets per upstream. */
  counts(): [string, { healthy: number; ejected: number }][] {
    return [...this.groups].map(([name, { group }]) => [name, group.counts()]);
  }

  /** Every target of every upstream: in rotation or not, and why it was last ejected. */
  targets(): UpstreamTargetState[] {
    return [...this.groups].flatMap(([name, { group }]) =>
      group.states().map(({ target, ejected }) => {
        const why = ejected ? this.ejections.get(`${name} ${target}`) : undefined;
        return { upstream: name, target, ejected, ...(why ?? {}) };
      }),
    );
  }

  /** Stops the health checks, waits for requests in flight, then closes every pool. */
  async close(): Promise<void> {
    await Promise.allSettled(this.takeAll().map((t) => t.dispatcher.close()));
  }

  /** Stops the health checks and ends every connection now, aborting requests in flight. */
  async destroy(): Promise<void> {
    await Promise.allSettled(this.takeAll().map((t) => t.dispatcher.destroy()));
  }

  private takeAll(): Target[] {
    const groups = [...this.groups.values()];
    this.groups.clear();
    for (const { group } of groups) group.stop();
    return groups.flatMap(({ group }) => group.targets);
  }

  /** A group for `upstream`, adopting the targets of `previous` whose connection settings match. */
  private build(upstream: CompiledUpstream, previous: UpstreamTargets | undefined): UpstreamTargets {
    const group = new UpstreamGroup<Pool>({
      name: upstream.name,
      targets: upstream.targets,
      health: upstream.health,
      clock: this.clock,
      dispatcher: (origin) =>
        new (upstream.tls?.servername === undefined ? Pool : namedPool(upstream.tls.servername))(origin, {
          connections: upstream.connections,
          // One request per connection at a time: pipelining puts a slow response in front of
          // unrelated ones (head-of-line blocking).
          pipelining: 1,
          // The upstream's TLS (CA, client certificate, SNI) on every connection of an https
          // target, health checks' included: they run on this same pool.
          connect: { timeout: upstream.connectTimeoutMs, ...tlsConnectOptions(upstream.tls) },
          keepAliveTimeout: 4000,
        }),
      probe: httpProbe,
      onEvent: (event) => this.onEvent(event),
      adopt: previous && ((spec: TargetSpec) => previous.targets.find((t) => t.key === spec.key)),
    });
    this.groups.set(upstream.name, { key: upstream.poolKey, group });
    return group;
  }

  /** Log lines and metrics of health changes and retries. */
  private onEvent(event: GroupEvent): void {
    const { logger, metrics } = this.deps;
    switch (event.kind) {
      case "ejected":
        this.ejections.set(`${event.upstream} ${event.target}`, {
          by: event.by === "passive" ? "requests" : "health_check",
          reason: String(event.reason),
          sinceMs: Date.now(),
        });
        metrics?.upstreamEjections.labels(event.upstream).inc();
        logger?.warn(
          event.by === "passive"
            ? {
                upstream: event.upstream,
                target: event.target,
                by: "requests",
                reason: event.reason,
                failures: event.failures,
                backoff_ms: event.backoffMs,
              }
            : { upstream: event.upstream, target: event.target, by: "health_check", reason: event.reason },
          "upstream target ejected",
        );
        return;
      case "returned":
        this.ejections.delete(`${event.upstream} ${event.target}`);
        logger?.info(
          {
            upstream: event.upstream,
            target: event.target,
            by: event.by === "active" ? "health_check" : "backoff",
          },
          event.by === "active"
            ? "upstream target returned"
            : "upstream target returned on probation: one request at a time until one succeeds",
        );
        return;
      case "no_healthy_target":
        logger?.warn(
          { upstream: event.upstream, targets: event.targets },
          "upstream has no healthy target: requests go to every target until one returns",
        );
        return;
      case "retry":
        metrics?.upstreamRetries.labels(event.upstream, event.outcome).inc();
        return;
    }
  }
}

/**
 * A Pool whose requests all ask for `servername` in SNI and certificate checks. undici takes a
 * request's own servername (from its Host header, unless that is an IP address) before the
 * connect options' one, so the configured name must ride on every request, probes included.
 */
function namedPool(servername: string): typeof Pool {
  return class NamedPool extends Pool {
    override dispatch(
      options: Parameters<Pool["dispatch"]>[0],
      handler: Parameters<Pool["dispatch"]>[1],
    ): boolean {
      // Read by undici's Request (lib/core/request.js), though its types leave it out.
      return super.dispatch({ ...options, servername } as typeof options, handler);
    }
  };
}

/** One active check: GET the health path on the target's own pool; any 2xx passes. */
async function httpProbe(
  target: Target,
  settings: HealthCheckSettings,
  signal: AbortSignal,
): Promise<string | null> {
  const { statusCode, body } = await target.dispatcher.request({
    method: "GET",
    path: settings.path,
    headers: { host: target.host, "user-agent": "tollgate-health-check" },
    headersTimeout: settings.timeoutMs,
    bodyTimeout: settings.timeoutMs,
    signal,
  });
  await body.dump();
  return statusCode >= 200 && statusCode < 300 ? null : `status ${statusCode}`;
}
