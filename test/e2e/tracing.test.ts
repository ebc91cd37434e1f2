// OpenTelemetry traces from a real gateway process (telemetry.traces, docs/observability.md):
// a local OTLP/HTTP collector decodes what the exporter sends, and the spans of an allowed and a
// denied request are read back from it: the server span, its limit-check and upstream-attempt
// children (a refused target retried on the live one), the decision and the limit names, no
// caller id unless switched on, a trusted caller's trace continued and an untrusted one's not,
// the traceparent the upstream received, and the log line's trace id. With tracing off, the same
// gateway is shown to load no OpenTelemetry module at all (a resolve hook lists every module).
import { mkdtempSync, readFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { metricValue, spawnGateway } from "../support/gateway.js";
import { send } from "../support/http.js";
import { type CollectedSpan, type Collector, SPAN_KIND, startCollector } from "../support/otlp-collector.js";
import { deadPort } from "../support/ports.js";
import { type RedisProcess, startRedis } from "../support/redis.js";
import { startUpstream, type TestUpstream } from "../support/upstream.js";

const IMPORT_LOG_HOOK = new URL("../support/import-log.mjs", import.meta.url).pathname;
const TRUSTED = "127.0.0.2";

const config = (redisUrl: string, upstreamUrl: string, deadUrl: string, telemetry: string) => `
listen: 127.0.0.1:0
admin: { listen: 127.0.0.1:0 }
log: { level: info, requests: true }
store: { url: ${redisUrl} }
upstreams:
  api:
    # The refused target first (weight 3 to 1): the first request's first attempt fails and is
    # retried on the live one.
    targets: [{ url: ${deadUrl}, weight: 3 }, { url: ${upstreamUrl}, weight: 1 }]
    retries: 1
identity: { trusted_proxies: [${TRUSTED}/32] }
clients:
  - { id: alpha-client, key: key-alpha-secret, plan: pro }
  - { id: beta-client, key: key-beta-secret, plan: pro }
  - { id: gamma-client, key: key-gamma-secret, plan: roomy }
plans:
  pro: { global: { rate: 1/h, burst: 1 } }
  roomy: { global: { rate: 1/h, burst: 100 } }
routes:
  - { name: orders, match: { path: /orders }, upstream: api }
${telemetry}
`;

const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN = "00f067aa0ba902b7";
const traceparent = (trace: string, span: string) => `00-${trace}-${span}-01`;

let redis: RedisProcess;
let upstream: TestUpstream;
let collector: Collector;
let deadUrl: string;

beforeAll(async () => {
  [redis, upstream, collector] = await Promise.all([startRedis(), startUpstream(), startCollector()]);
  deadUrl = `http://127.0.0.1:${await deadPort()}`;
}, 30_000);
afterAll(async () => {
  await upstream?.close();
  await collector?.close();
  await redis?.stop();
});

function importLog(): { file: string; env: Record<string, string> } {
  const file = join(mkdtempSync(join(tmpdir(), "tollgate-imports-")), "imports.log");
  return { file, env: { NODE_OPTIONS: `--import=${IMPORT_LOG_HOOK}`, TOLLGATE_IMPORT_LOG: file } };
}

const childrenOf = (spans: CollectedSpan[], parent: CollectedSpan) =>
  spans.filter((s) => s.traceId === parent.traceId && s.parentSpanId === parent.spanId);

/** Every attribute value of every span, flattened: where a caller id must not appear. */
const allValues = (spans: CollectedSpan[]) =>
  spans.flatMap((s) => Object.values(s.attributes).flat().map(String));

describe("telemetry.traces on", () => {
  let spans: CollectedSpan[];
  let logs: Record<string, unknown>[];
  let imports: string;
  const replies: { allowed?: string; denied?: string; untrusted?: string; odd?: string; badHost?: string } =
    {};
  let upstreamTraceparents: string[];
  let trustedUpstreamHeaders: Record<string, unknown>;
  let untrustedUpstreamHeaders: Record<string, unknown>;

  beforeAll(async () => {
    const log = importLog();
    const gw = await spawnGateway(
      config(
        redis.url,
        upstream.url,
        deadUrl,
        `telemetry: { traces: { endpoint: ${collector.url}, sample: 1.0, service_name: tollgate-e2e, headers: { authorization: "Bearer otlp-secret" } } }`,
      ),
      log.env,
    );
    const asAlpha = {
      path: "/orders?token=do-not-record",
      headers: {
        "x-api-key": "key-alpha-secret",
        traceparent: traceparent(TRACE_ID, CALLER_SPAN),
        baggage: "tenant=alpha",
      },
      localAddress: TRUSTED,
    };
    const allowed = await send(gw.url, asAlpha);
    expect(allowed.status).toBe(200);
    trustedUpstreamHeaders = upstream.received.at(-1)!.headers;
    const denied = await send(gw.url, asAlpha);
    expect(denied.status).toBe(429);
    // From 127.0.0.1, not a trusted proxy: its traceparent must not be continued.
    const untrusted = await send(gw.url, {
      // A path past the attribute limit (512 characters kept).
      path: `/orders/${"p".repeat(2000)}`,
      headers: {
        "x-api-key": "key-beta-secret",
        traceparent: traceparent(TRACE_ID, CALLER_SPAN),
        // Trace context in other formats, which an upstream may read instead.
        baggage: "isAdmin=true",
        b3: `${TRACE_ID}-${CALLER_SPAN}-1`,
        "x-b3-sampled": "1",
        "uber-trace-id": `${TRACE_ID}:${CALLER_SPAN}:0:1`,
        "x-amzn-trace-id": "Root=1-5759e988-bd862e3fe1be46a994272793;Sampled=1",
        "uberctx-user": "alice",
      },
    });
    expect(untrusted.status).toBe(200);
    untrustedUpstreamHeaders = upstream.received.at(-1)!.headers;
    // A Host the gateway refuses: its span says nothing of what the client wrote there.
    const badHost = await send(gw.url, {
      path: "/orders",
      headers: { host: "user-alice@corp.example:7777" },
    });
    expect(badHost.status).toBe(400);
    replies.badHost = String(badHost.headers["x-request-id"]);
    replies.allowed = String(allowed.headers["x-request-id"]);
    replies.denied = String(denied.headers["x-request-id"]);
    replies.untrusted = String(untrusted.headers["x-request-id"]);
    upstreamTraceparents = upstream.received.map((r) => String(r.headers.traceparent));
    // A method of the client's own: no span is named after it.
    const odd = await send(gw.url, {
      method: "PURGE",
      path: "/orders",
      headers: { "x-api-key": "key-gamma-secret" },
    });
    replies.odd = String(odd.headers["x-request-id"]);
    // Stopped at once: the spans still batched are exported on SIGTERM, before the exit.
    expect(await gw.stop()).toBe(0);
    spans = collector.spans;
    logs = gw.lines;
    imports = readFileSync(log.file, "utf8");
  }, 30_000);

  const serverSpan = (requestId: string | undefined) => {
    const line = logs.find((l) => l.msg === "request" && l.request_id === requestId);
    expect(line, `the request line of ${requestId}`).toBeDefined();
    const span = spans.find(
      (s) => s.kind === SPAN_KIND.server && s.traceId === line!.trace_id && s.spanId === line!.span_id,
    );
    expect(span, `a server span with the log line's trace id ${String(line!.trace_id)}`).toBeDefined();
    return span!;
  };

  it("exports OTLP/HTTP JSON to the endpoint with the configured headers and service name", () => {
    expect(collector.rejected).toBe(0);
    expect(collector.requests[0]?.authorization).toBe("Bearer otlp-secret");
    expect(spans.length).toBeGreaterThan(0);
    expect(new Set(spans.map((s) => s.resource["service.name"]))).toEqual(new Set(["tollgate-e2e"]));
  });

  it("the allowed request: a server span continuing the trusted caller's trace, with route, decision and limit", () => {
    const span = serverSpan(replies.allowed);
    expect(span.traceId).toBe(TRACE_ID);
    expect(span.parentSpanId).toBe(CALLER_SPAN);
    expect(span.name).toBe("GET /orders");
    expect(span.attributes).toMatchObject({
      "http.request.method": "GET",
      "http.route": "/orders",
      "http.response.status_code": 200,
      "url.path": "/orders",
      "url.scheme": "http",
      "server.address": "127.0.0.1",
      "tollgate.route": "orders",
      "tollgate.upstream": "api",
      "tollgate.plan": "pro",
      "tollgate.decision": "allowed",
      "tollgate.outcome": "allowed",
      "tollgate.limits": ["pro.global"],
      "tollgate.caller.kind": "client",
    });
  });

  it("the allowed request: a limit-check child, and one child per upstream attempt, the refused one retried", () => {
    const span = serverSpan(replies.allowed);
    const children = childrenOf(spans, span);
    const check = children.filter((c) => c.name === "limit check");
    expect(check).toHaveLength(1);
    expect(check[0]!.kind).toBe(SPAN_KIND.internal);
    expect(check[0]!.attributes["tollgate.decision"]).toBe("allowed");
    expect(check[0]!.startNs).toBeGreaterThanOrEqual(span.startNs);
    expect(check[0]!.endNs).toBeLessThanOrEqual(span.endNs);
    const attempts = children
      .filter((c) => c.kind === SPAN_KIND.client)
      .sort((a, b) => Number(a.startNs - b.startNs));
    expect(attempts).toHaveLength(2);
    const refusedPort = Number(new URL(deadUrl).port);
    expect(attempts[0]!.attributes).toMatchObject({
      "http.request.method": "GET",
      "server.address": "127.0.0.1",
      "server.port": refusedPort,
      "url.full": `${deadUrl}/orders`,
      "error.type": "refused",
    });
    expect(attempts[0]!.status.code).toBe(2); // ERROR
    expect(attempts[1]!.attributes).toMatchObject({
      "server.port": upstream.port,
      "http.request.resend_count": 1,
      "http.response.status_code": 200,
      "url.full": `${upstream.url}/orders`,
    });
    // The query (a client may put a credential there) is in no span.
    expect(allValues(spans).some((v) => v.includes("do-not-record"))).toBe(false);
  });

  it("the upstream received a traceparent whose parent is the gateway's attempt span", () => {
    const span = serverSpan(replies.allowed);
    const live = childrenOf(spans, span).find(
      (c) => c.kind === SPAN_KIND.client && c.attributes["server.port"] === upstream.port,
    )!;
    expect(upstreamTraceparents[0]).toBe(`00-${TRACE_ID}-${live.spanId}-01`);
  });

  it("the denied request: decision denied, the limit that denied it, the limit check, no upstream attempt", () => {
    const span = serverSpan(replies.denied);
    expect(span.traceId).toBe(TRACE_ID);
    expect(span.attributes).toMatchObject({
      "http.response.status_code": 429,
      "tollgate.decision": "denied",
      "tollgate.outcome": "limited",
      "tollgate.limits": ["pro.global"],
      "tollgate.limits.denied": ["pro.global"],
    });
    // A 429 is the gateway doing its job, not a server error.
    expect(span.status.code).not.toBe(2);
    const children = childrenOf(spans, span);
    expect(children.map((c) => c.name)).toEqual(["limit check"]);
    expect(children[0]!.attributes["tollgate.decision"]).toBe("denied");
  });

  it("an untrusted caller's traceparent starts a new trace, linked to the one it sent; the upstream sees the new one", () => {
    const span = serverSpan(replies.untrusted);
    expect(span.traceId).not.toBe(TRACE_ID);
    expect(span.parentSpanId).toBe("");
    expect(span.links).toEqual([
      { traceId: TRACE_ID, spanId: CALLER_SPAN, attributes: { "tollgate.link": "untrusted_traceparent" } },
    ]);
    const attempt = childrenOf(spans, span).find(
      (c) => c.kind === SPAN_KIND.client && c.attributes["server.port"] === upstream.port,
    )!;
    expect(upstreamTraceparents.at(-1)).toBe(`00-${span.traceId}-${attempt.spanId}-01`);
  });

  it("an untrusted caller's trace context in other formats never reaches the upstream; a trusted one's does", () => {
    for (const name of ["baggage", "b3", "x-b3-sampled", "uber-trace-id", "x-amzn-trace-id", "uberctx-user"])
      expect(untrustedUpstreamHeaders[name], name).toBeUndefined();
    expect(trustedUpstreamHeaders.baggage).toBe("tenant=alpha");
  });

  it("a value past 512 characters is cut, and a refused Host is not recorded", () => {
    const span = serverSpan(replies.untrusted);
    expect(String(span.attributes["url.path"])).toHaveLength(512);
    const refused = serverSpan(replies.badHost);
    expect(refused.attributes["http.response.status_code"]).toBe(400);
    expect(refused.attributes["server.address"]).toBeUndefined();
    expect(refused.attributes["server.port"]).toBeUndefined();
  });

  it("a method the HTTP conventions do not know is _OTHER, and names no span", () => {
    const span = serverSpan(replies.odd);
    expect(span.name).toBe("HTTP /orders");
    expect(span.attributes).toMatchObject({
      "http.request.method": "_OTHER",
      "http.request.method_original": "PURGE",
    });
  });

  it("names no caller: no client id, key, tenant or address in any span", () => {
    const values = allValues(spans);
    for (const secret of ["alpha-client", "beta-client", "key-alpha-secret", "key-beta-secret"])
      expect(
        values.some((v) => v.includes(secret)),
        secret,
      ).toBe(false);
    expect(values).not.toContain(TRUSTED);
    for (const s of spans) {
      expect(s.attributes["tollgate.caller.id"]).toBeUndefined();
      expect(s.attributes["client.address"]).toBeUndefined();
    }
  });

  it("the process loaded OpenTelemetry (the import log sees it: the check with tracing off is not vacuous)", () => {
    expect(imports).toMatch(/@opentelemetry\/sdk-trace-base/);
    expect(imports).toMatch(/dist\/observability\/otel-tracing\.js/);
  });
});

describe("telemetry.traces with sample: 0 and caller_ids: true", () => {
  it("exports no new trace, yet keeps a trusted caller's sampled one (parent-based), naming the caller; ids still on the log line and upstream", async () => {
    const before = collector.spans.length;
    const gw = await spawnGateway(
      config(
        redis.url,
        upstream.url,
        deadUrl,
        `telemetry: { traces: { endpoint: ${collector.url}/v1/traces, sample: 0, caller_ids: true } }`,
      ),
    );
    const received = upstream.received.length;
    const untraced = await send(gw.url, { path: "/orders", headers: { "x-api-key": "key-gamma-secret" } });
    const sampledTrace = "0af7651916cd43dd8448eb211c80319c";
    const traced = await send(gw.url, {
      path: "/orders",
      headers: { "x-api-key": "key-gamma-secret", traceparent: traceparent(sampledTrace, CALLER_SPAN) },
      localAddress: TRUSTED,
    });
    await gw.stop();
    const spans = collector.spans.slice(before);
    const lineOf = (reply: typeof traced) =>
      gw.lines.find((l) => l.msg === "request" && l.request_id === reply.headers["x-request-id"])!;
    const untracedId = String(lineOf(untraced).trace_id);
    expect(untracedId).toMatch(/^[0-9a-f]{32}$/);
    expect(spans.some((s) => s.traceId === untracedId)).toBe(false);
    // Its upstream got the unsampled context (flags 00), parent the server span's id.
    const sent = upstream.received.slice(received).map((r) => String(r.headers.traceparent));
    expect(sent[0]).toBe(`00-${untracedId}-${String(lineOf(untraced).span_id)}-00`);
    expect(lineOf(traced).trace_id).toBe(sampledTrace);
    const span = spans.find((s) => s.kind === SPAN_KIND.server && s.traceId === sampledTrace);
    expect(span?.parentSpanId).toBe(CALLER_SPAN);
    expect(span?.attributes).toMatchObject({
      "tollgate.caller.kind": "client",
      "tollgate.caller.id": "gamma-client",
      "client.address": TRUSTED,
    });
    expect(span?.resource["service.name"]).toBe("tollgate");
  }, 20_000);
});

describe("a collector that hangs", () => {
  it("costs requests nothing, and a stop waits for it at most timeout + 1 s, saying the spans were dropped", async () => {
    // Accepts connections and reads the exports, never answers.
    const hanging = createServer((socket) => socket.resume());
    await new Promise<void>((resolve) => hanging.listen(0, "127.0.0.1", resolve));
    const port = (hanging.address() as { port: number }).port;
    try {
      const gw = await spawnGateway(
        config(
          redis.url,
          upstream.url,
          deadUrl,
          `telemetry: { traces: { endpoint: "http://127.0.0.1:${port}/v1/traces", timeout: 500ms } }`,
        ),
      );
      for (let i = 0; i < 3; i++) {
        const reply = await send(gw.url, { path: "/orders", headers: { "x-api-key": "key-gamma-secret" } });
        expect(reply.status).toBe(200);
        expect(reply.ms).toBeLessThan(1000);
      }
      // The batch goes after 1 s, and fails 500 ms later: counted, for an alert on the metric.
      const failed = /^tollgate_trace_spans_total\{outcome="failed"\} (\d+)$/m;
      const started = performance.now();
      while (!((await metricValue(gw.adminUrl, failed)) >= 3)) {
        if (performance.now() - started > 5000) throw new Error("no failed export counted within 5 s");
        await new Promise((r) => setTimeout(r, 100));
      }
      const stopping = performance.now();
      expect(await gw.stop()).toBe(0);
      expect(performance.now() - stopping).toBeLessThan(4000);
      expect(gw.lines.some((l) => /^trace export (at shutdown )?failed/.test(String(l.msg)))).toBe(true);
    } finally {
      hanging.close();
    }
  }, 20_000);
});

describe("telemetry absent", () => {
  it("a running gateway loads no OpenTelemetry module, and its log line has no trace id", async () => {
    const log = importLog();
    const gw = await spawnGateway(config(redis.url, upstream.url, deadUrl, ""), log.env);
    const reply = await send(gw.url, { path: "/orders", headers: { "x-api-key": "key-alpha-secret" } });
    expect([200, 429]).toContain(reply.status);
    await gw.stop();
    const imports = readFileSync(log.file, "utf8");
    // The hook saw the gateway's own modules, the request path included: it was listening.
    expect(imports).toMatch(/dist\/proxy\/pipeline\.js/);
    expect(imports).toMatch(/dist\/gateway\/gateway\.js/);
    expect(imports).not.toMatch(/opentelemetry/i);
    expect(imports).not.toMatch(/otel-tracing/);
    const line = gw.lines.find((l) => l.msg === "request");
    expect(line).toBeDefined();
    expect(line).not.toHaveProperty("trace_id");
    expect(line).not.toHaveProperty("span_id");
  }, 20_000);
});
