// Where the request path meets tracing (observability/tracing.ts): the server span started when
// a request arrives, the trace context each upstream attempt carries, and what the span records
// once the request has ended. Every caller checks `env.tracing` or `ctx.trace` first, so with
// tracing off none of this runs.
import { formatIp } from "../identity/ip.js";
import { socketPeer } from "../identity/peer.js";
import type { RequestTrace, Tracing } from "../observability/tracing.js";
import type { RequestContext } from "./context.js";

/**
 * Starts the request's server span. Whether its `traceparent` is believed is the gateway's
 * trusted-proxy notion (identity.trusted_proxies), decided here from the socket peer as admit
 * decides it for forwarding headers: the span must exist before admit runs.
 */
export function startTrace(tracing: Tracing, ctx: RequestContext): void {
  const peer = socketPeer(ctx.req.socket);
  const proxies = ctx.gen.runtime.identity.trustedProxies;
  ctx.trace = tracing.startRequest({
    method: ctx.method,
    headers: ctx.req.headers,
    host: ctx.req.headers.host ?? ctx.req.headers[":authority"]?.toString(),
    scheme: ctx.scheme,
    trusted: peer !== null && proxies.size > 0 && proxies.contains(peer.bytes),
  });
}

/** The request has ended (respond.ts complete): its span records how, and ends. */
export function endTrace(trace: RequestTrace, ctx: RequestContext): void {
  const route = ctx.route;
  const caller = ctx.caller;
  trace.end({
    status: ctx.status,
    outcome: ctx.decision,
    path: ctx.path,
    route: route && { name: route.name, prefix: route.matchPrefix, upstream: route.upstream.name },
    plan: caller?.plan?.name,
    caller: caller && {
      kind: caller.kind,
      id: caller.kind === "client" ? caller.id : caller.ipKey,
      tenant: caller.kind === "client" ? caller.tenant : undefined,
      address: ctx.ip === undefined ? undefined : formatIp(ctx.ip),
    },
    queuedMs: ctx.queuedMs,
    upstreamError: ctx.upstreamError,
  });
}

/**
 * The upstream request's headers (flat name/value pairs, as upstreamRequestHeaders spells them) with the client's
 * `traceparent` and `tracestate` replaced by the gateway's: a trusted caller's trace continues
 * through the gateway's span, an untrusted caller's never reaches the upstream.
 */
export function withTraceContext(
  headers: readonly string[],
  carried: { traceparent: string; tracestate: string | undefined },
): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const name = headers[i]!;
    const lower = name.length === 11 || name.length === 10 ? name.toLowerCase() : "";
    if (lower === "traceparent" || lower === "tracestate") continue;
    out.push(name, headers[i + 1]!);
  }
  if (carried.traceparent) out.push("traceparent", carried.traceparent);
  if (carried.tracestate) out.push("tracestate", carried.tracestate);
  return out;
}

/** Trace context in other formats than W3C's: headers by name, and families by prefix. */
const FOREIGN_CONTEXT = new Set([
  "baggage",
  "b3",
  "x-b3-traceid",
  "x-b3-spanid",
  "x-b3-parentspanid",
  "x-b3-sampled",
  "x-b3-flags",
  "uber-trace-id",
  "x-amzn-trace-id",
  "sentry-trace",
  "x-cloud-trace-context",
  "grpc-trace-bin",
  "x-datadog-trace-id",
  "x-datadog-parent-id",
  "x-datadog-sampling-priority",
  "x-datadog-origin",
]);
const FOREIGN_PREFIXES = ["uberctx-", "ot-baggage-", "ot-tracer-"];

/**
 * An untrusted client's upstream headers without trace context in any other format: the
 * gateway replaces its `traceparent`, and an upstream reading B3, Jaeger, X-Ray, Sentry or
 * Datadog headers, or OpenTelemetry's `baggage` (propagated by its SDKs by default), would
 * otherwise take from the client the trace id, the sampled flag or entries of its context.
 * Only with tracing on: off, the gateway passes every header as before.
 */
export function withoutForeignTraceContext(headers: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < headers.length; i += 2) {
    const lower = headers[i]!.toLowerCase();
    if (FOREIGN_CONTEXT.has(lower) || FOREIGN_PREFIXES.some((p) => lower.startsWith(p))) continue;
    out.push(headers[i]!, headers[i + 1]!);
  }
  return out;
}
