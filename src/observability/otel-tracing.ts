// The tracing interface (tracing.ts) on the official OpenTelemetry SDK: one BasicTracerProvider,
// a parent-based ratio sampler, a batch processor and the OTLP/HTTP (JSON) exporter. Loaded
// only through startTracing's dynamic import: nothing here may be imported statically.
//
// Contexts are passed by hand (span → child), not through a global context manager: the
// request path is callbacks and promises the gateway already threads a RequestContext through,
// and AsyncLocalStorage would cost every request of every route, not only the traced ones.
import {
  type Attributes,
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  isSpanContextValid,
  type Link,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import { ExportResultCode, W3CTraceContextPropagator } from "@opentelemetry/core";
import { OTLPTraceExporter } from "@opentelemetry/exporter-trace-otlp-http";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  BasicTracerProvider,
  BatchSpanProcessor,
  ParentBasedSampler,
  type ReadableSpan,
  type SpanExporter,
  TraceIdRatioBasedSampler,
} from "@opentelemetry/sdk-trace-base";
import type { Logger } from "pino";
import type { LimitDecision } from "../limits/decision.js";
import type { TraceSettings } from "../model/telemetry.js";
import {
  type ArrivingRequest,
  type EndedRequest,
  type RequestTrace,
  shownEndpoint,
  type Tracing,
  type UpstreamAttempt,
} from "./tracing.js";

/** Spans waiting for export at most; past it new ones are dropped (the SDK counts them). */
const MAX_QUEUED_SPANS = 8192;
/** Characters kept of an attribute value (a path, a host): the rest is cut by the SDK. */
const MAX_ATTRIBUTE_LENGTH = 512;
/** A failed export is logged at most this often, with the count of those not logged. */
const EXPORT_WARNING_INTERVAL_MS = 30_000;

const propagator = new W3CTraceContextPropagator();

export class OtelTracing implements Tracing {
  private readonly provider: BasicTracerProvider;
  private readonly tracer: Tracer;

  constructor(
    private readonly settings: TraceSettings,
    logger: Logger,
    onExport?: (outcome: "exported" | "failed", spans: number) => void,
  ) {
    const exporter = new WarnOnFailure(
      new OTLPTraceExporter({
        url: settings.endpoint,
        headers: { ...settings.headers },
        timeoutMillis: settings.exportTimeoutMs,
      }),
      logger,
      shownEndpoint(settings.endpoint),
      onExport,
    );
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ "service.name": settings.serviceName }),
      // A trusted caller's sampled flag decides for its trace; a new trace is kept by ratio.
      sampler: new ParentBasedSampler({ root: new TraceIdRatioBasedSampler(settings.sample) }),
      // A client's 15 KB path was two 15 KB attributes a span (url.path, url.full): exported
      // as sent, and 8,192 queued spans of them held 400 MB more while a collector hung.
      spanLimits: { attributeValueLengthLimit: MAX_ATTRIBUTE_LENGTH },
      spanProcessors: [
        new BatchSpanProcessor(exporter, {
          maxQueueSize: MAX_QUEUED_SPANS,
          maxExportBatchSize: 512,
          scheduledDelayMillis: 1000,
          exportTimeoutMillis: settings.exportTimeoutMs,
        }),
      ],
    });
    this.tracer = this.provider.getTracer("tollgate");
  }

  startRequest(arriving: ArrivingRequest): RequestTrace {
    // Only a trusted proxy's trace context is continued: anyone else's would let a client pick
    // the trace id (and, parent-based, whether it is sampled). An untrusted one is kept as a
    // link, so a trace the client started can still be found from ours.
    const sent = propagator.extract(ROOT_CONTEXT, arriving.headers, defaultTextMapGetter);
    const sentContext = trace.getSpanContext(sent);
    const parent = arriving.trusted ? sent : ROOT_CONTEXT;
    const links: Link[] =
      !arriving.trusted && sentContext && isSpanContextValid(sentContext)
        ? [{ context: sentContext, attributes: { "tollgate.link": "untrusted_traceparent" } }]
        : [];
    const method = knownMethod(arriving.method);
    const span = this.tracer.startSpan(method ?? "HTTP", { kind: SpanKind.SERVER, links }, parent);
    const ctx = trace.setSpan(ROOT_CONTEXT, span);
    // Not sampled: the ids go on the log line and upstream, and nothing else is done for it.
    if (!span.isRecording()) return new UnsampledTrace(span, ctx);
    const attributes: Attributes = methodAttributes(arriving.method, method);
    attributes["url.scheme"] = arriving.scheme;
    const host = splitHost(arriving.host);
    if (host) {
      attributes["server.address"] = host.address;
      if (host.port !== undefined) attributes["server.port"] = host.port;
    }
    span.setAttributes(attributes);
    return new OtelRequestTrace(this.tracer, span, ctx, method ?? "HTTP", this.settings.callerIds);
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}

class OtelRequestTrace implements RequestTrace {
  readonly traceId: string;
  readonly spanId: string;
  private coarseDecision: string | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
    private readonly context: Context,
    private readonly method: string,
    private readonly callerIds: boolean,
  ) {
    const ids = span.spanContext();
    this.traceId = ids.traceId;
    this.spanId = ids.spanId;
  }

  storeWait(): (decision: LimitDecision | undefined) => void {
    const child = this.tracer.startSpan("limit check", { kind: SpanKind.INTERNAL }, this.context);
    return (decision) => {
      if (decision) child.setAttribute("tollgate.decision", coarse(decision));
      else child.setStatus({ code: SpanStatusCode.ERROR, message: "the limiter failed" });
      child.end();
    };
  }

  decided(decision: LimitDecision): void {
    const span = this.span;
    this.coarseDecision = coarse(decision);
    span.setAttribute("tollgate.decision", this.coarseDecision);
    switch (decision.kind) {
      case "denied":
        span.setAttribute(
          "tollgate.limits",
          decision.applied.map((a) => a.spec.name),
        );
        span.setAttribute(
          "tollgate.limits.denied",
          decision.violated.map((v) => v.spec.name),
        );
        if (decision.degraded) span.setAttribute("tollgate.degraded.reason", decision.degraded);
        return;
      case "allowed":
        span.setAttribute(
          "tollgate.limits",
          decision.applied.map((a) => a.spec.name),
        );
        if (decision.degraded) span.setAttribute("tollgate.degraded.reason", decision.degraded);
        return;
      case "degraded":
        span.setAttribute("tollgate.degraded.reason", decision.reason);
        span.setAttribute("tollgate.degraded.policy", decision.policy);
        return;
      case "unlimited":
        return;
    }
  }

  attempt(target: { host: string; url: string }, method: string, resend: number): UpstreamAttempt {
    const host = splitHost(target.host);
    const known = knownMethod(method);
    const attributes: Attributes = methodAttributes(method, known);
    attributes["url.full"] = target.url;
    if (host) {
      attributes["server.address"] = host.address;
      if (host.port !== undefined) attributes["server.port"] = host.port;
    }
    if (resend > 0) attributes["http.request.resend_count"] = resend;
    const span = this.tracer.startSpan(known ?? "HTTP", { kind: SpanKind.CLIENT, attributes }, this.context);
    const carried = carrier(trace.setSpan(this.context, span));
    return {
      traceparent: carried.traceparent,
      tracestate: carried.tracestate,
      end(status: number, failure?: string) {
        if (status > 0) span.setAttribute("http.response.status_code", status);
        if (failure) {
          span.setAttribute("error.type", failure);
          span.setStatus({ code: SpanStatusCode.ERROR, message: failure });
        } else if (status >= 500) {
          span.setAttribute("error.type", String(status));
          span.setStatus({ code: SpanStatusCode.ERROR });
        }
        span.end();
      },
    };
  }

  propagation(): { traceparent: string; tracestate: string | undefined } {
    return carrier(this.context);
  }

  end(ended: EndedRequest): void {
    const span = this.span;
    const attributes: Attributes = {
      "http.response.status_code": ended.status,
      "tollgate.outcome": ended.outcome,
      // Refused before any limit was asked (no route, bad request, 401/403): say so.
      "tollgate.decision": this.coarseDecision ?? (ended.outcome === "exempt" ? "exempt" : "refused"),
    };
    if (ended.path) attributes["url.path"] = ended.path;
    const route = ended.route;
    if (route) {
      attributes["http.route"] = route.prefix;
      attributes["tollgate.route"] = route.name;
      attributes["tollgate.upstream"] = route.upstream;
      // {method} {http.route}, the conventions' name, once the route is known.
      span.updateName(`${this.method} ${route.prefix}`);
    }
    if (ended.plan !== undefined) attributes["tollgate.plan"] = ended.plan;
    const caller = ended.caller;
    if (caller) {
      attributes["tollgate.caller.kind"] = caller.kind;
      if (this.callerIds) {
        attributes["tollgate.caller.id"] = caller.id;
        if (caller.tenant !== undefined) attributes["tollgate.tenant"] = caller.tenant;
        if (caller.address !== undefined) attributes["client.address"] = caller.address;
      }
    }
    if (ended.queuedMs !== undefined) attributes["tollgate.queued_ms"] = ended.queuedMs;
    if (ended.upstreamError) attributes["error.type"] = ended.upstreamError;
    span.setAttributes(attributes);
    // A server span is an error for a 5xx only (OTel HTTP conventions): a 429 is the gateway
    // doing its job.
    if (ended.status >= 500) {
      if (!ended.upstreamError) span.setAttribute("error.type", String(ended.status));
      span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

const NOTHING = () => {};

/**
 * A request whose trace is not sampled (by the ratio, or by a trusted caller's flag): no span is
 * recorded, so no child is started and no attribute built. The upstream still gets the trace
 * context (its parent the server span's id, flagged unsampled), so the trace stays one.
 */
class UnsampledTrace implements RequestTrace {
  readonly traceId: string;
  readonly spanId: string;
  private readonly carried: { traceparent: string; tracestate: string | undefined };

  constructor(span: Span, ctx: Context) {
    const ids = span.spanContext();
    this.traceId = ids.traceId;
    this.spanId = ids.spanId;
    this.carried = carrier(ctx);
  }

  storeWait(): (decision: LimitDecision | undefined) => void {
    return NOTHING;
  }

  decided(): void {}

  attempt(): UpstreamAttempt {
    return { traceparent: this.carried.traceparent, tracestate: this.carried.tracestate, end: NOTHING };
  }

  propagation(): { traceparent: string; tracestate: string | undefined } {
    return this.carried;
  }

  end(): void {}
}

/** allowed | denied | degraded | exempt: what the limits said, in one word. */
function coarse(decision: LimitDecision): string {
  switch (decision.kind) {
    case "denied":
      return "denied";
    case "degraded":
      return "degraded";
    case "allowed":
      return decision.degraded ? "degraded" : "allowed";
    case "unlimited":
      return "exempt";
  }
}

/** RFC 9110's methods and PATCH: the only ones a span is named after (OTel HTTP conventions). */
const KNOWN_METHODS = new Set([
  "GET",
  "HEAD",
  "POST",
  "PUT",
  "DELETE",
  "CONNECT",
  "OPTIONS",
  "TRACE",
  "PATCH",
]);

/** `method` when it is a known one; a client's own word would give every request its own name. */
function knownMethod(method: string): string | undefined {
  return KNOWN_METHODS.has(method) ? method : undefined;
}

/** http.request.method, `_OTHER` with the original beside it for a method the conventions do not know. */
function methodAttributes(method: string, known: string | undefined): Attributes {
  return known
    ? { "http.request.method": known }
    : { "http.request.method": "_OTHER", "http.request.method_original": method };
}

/** The W3C headers for `ctx`'s span. */
function carrier(ctx: Context): { traceparent: string; tracestate: string | undefined } {
  const headers: Record<string, string> = {};
  propagator.inject(ctx, headers, defaultTextMapSetter);
  return { traceparent: headers.traceparent ?? "", tracestate: headers.tracestate };
}

/** The endpoint as logs may show it: a user and password in the URL are secrets. */

/** `host[:port]` or `[v6]:port` as OTel's server.address and server.port. */
function splitHost(host: string | undefined): { address: string; port: number | undefined } | null {
  if (!host) return null;
  // A name or an address, nothing else: the Host header is the client's, and a span must not
  // carry what it chose to write there (user@, spaces), even on a request refused for it.
  const m = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]{1,253})(?::(\d{1,5}))?$/.exec(host);
  if (!m) return null;
  return { address: m[1]!, port: m[2] === undefined ? undefined : Number(m[2]) };
}

/**
 * The exporter, with its failures logged (at most every EXPORT_WARNING_INTERVAL_MS): the SDK
 * drops a batch it cannot send and says nothing, so a collector that is down or refuses the
 * token would otherwise look like a quiet service.
 */
class WarnOnFailure implements SpanExporter {
  private lastWarnedAt = 0;
  private unlogged = 0;

  constructor(
    private readonly inner: SpanExporter,
    private readonly logger: Logger,
    private readonly endpoint: string,
    private readonly counted?: (outcome: "exported" | "failed", spans: number) => void,
  ) {}

  export(spans: ReadableSpan[], done: Parameters<SpanExporter["export"]>[1]): void {
    this.inner.export(spans, (result) => {
      const ok = result.code === ExportResultCode.SUCCESS;
      this.counted?.(ok ? "exported" : "failed", spans.length);
      if (!ok) this.failed(spans.length, result.error);
      done(result);
    });
  }

  private failed(count: number, error: Error | undefined): void {
    const now = Date.now();
    if (now - this.lastWarnedAt < EXPORT_WARNING_INTERVAL_MS) {
      this.unlogged++;
      return;
    }
    this.lastWarnedAt = now;
    this.logger.warn(
      {
        endpoint: this.endpoint,
        spans: count,
        err: error?.message,
        failures_not_logged: this.unlogged,
      },
      "trace export failed; these spans are dropped",
    );
    this.unlogged = 0;
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}
