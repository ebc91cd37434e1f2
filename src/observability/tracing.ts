// What the request path asks of tracing (telemetry.traces, docs/observability.md), as an
// interface of its own: the proxy never sees an OpenTelemetry type. The implementation
// (otel-tracing.ts) is imported dynamically, and only when the config turns tracing on, so a
// gateway without `telemetry.traces` loads no OpenTelemetry module and its requests pay one
// null check (`ctx.trace`) at each point a span would be touched.
import type { Logger } from "pino";
import type { LimitDecision } from "../limits/decision.js";
import type { TraceSettings } from "../model/telemetry.js";

/** Where a request arrived, for the server span's first attributes. */
export interface ArrivingRequest {
  method: string;
  /** The request's headers: `traceparent`/`tracestate` are read from them when trusted. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The Host header as sent (server.address, server.port). */
  host: string | undefined;
  scheme: "http" | "https";
  /** Whether the socket peer is a trusted proxy (identity.trusted_proxies). */
  trusted: boolean;
}

/** What the server span records once the request has ended. */
export interface EndedRequest {
  status: number;
  /** The label of tollgate_requests_total and the log line's `decision`. */
  outcome: string;
  /** The normalised path (url.path); empty when it could not be normalised. */
  path: string;
  route: { name: string; prefix: string; upstream: string } | undefined;
  plan: string | undefined;
  caller: { kind: string; id: string; tenant: string | undefined; address: string | undefined } | undefined;
  queuedMs: number | undefined;
  upstreamError: string | undefined;
}

/** One attempt to send the request upstream (each retry its own). */
export interface UpstreamAttempt {
  /** The trace context the upstream gets: its parent is this attempt's span. */
  readonly traceparent: string;
  readonly tracestate: string | undefined;
  /** `status`: the answer's; 0 when none came. `failure`: why the attempt failed, if it did. */
  end(status: number, failure?: string): void;
}

/** One request's trace: its server span and the children the stages start. */
export interface RequestTrace {
  /** The trace id (32 hex digits), written on the request's log lines. */
  readonly traceId: string;
  /** The server span's id (16 hex digits), on the request's log line beside the trace id. */
  readonly spanId: string;
  /** The limiter is being asked: the store wait, ended by the returned function. */
  storeWait(): (decision: LimitDecision | undefined) => void;
  /** What the limits decided, and which limits decided it (names only). */
  decided(decision: LimitDecision): void;
  /** `resend`: 0 for the first attempt, n for the n-th retry (http.request.resend_count). */
  attempt(target: { host: string; url: string }, method: string, resend: number): UpstreamAttempt;
  /** The trace context a tunnelled request's upstream gets (no attempt spans for tunnels). */
  propagation(): { traceparent: string; tracestate: string | undefined };
  end(ended: EndedRequest): void;
}

export interface Tracing {
  startRequest(arriving: ArrivingRequest): RequestTrace;
  /** Exports what is buffered and stops; bounded by the exporter's timeout. */
  shutdown(): Promise<void>;
}

/**
 * Loads OpenTelemetry and starts the exporter. The only way into otel-tracing.ts, and
 * dynamic on purpose: test/unit/tracing-imports.test.ts fails if a static import appears.
 */
export async function startTracing(
  settings: TraceSettings,
  logger: Logger,
  onExport?: (outcome: "exported" | "failed", spans: number) => void,
): Promise<Tracing> {
  const { OtelTracing } = await import("./otel-tracing.js");
  return new OtelTracing(settings, logger, onExport);
}

/**
 * The exporter's endpoint as logs and /admin/config show it: no user, password or query (a
 * vendor's ingest key is often one of them).
 */
export function shownEndpoint(endpoint: string): string {
  const url = new URL(endpoint);
  const hidden = url.search !== "";
  url.username = "";
  url.password = "";
  url.search = "";
  return hidden ? `${url.toString()}?…` : url.toString();
}
