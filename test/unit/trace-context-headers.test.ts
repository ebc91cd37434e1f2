// The trace context an upstream request carries with tracing on: the gateway's, whatever the
// client sent, in any spelling of the header names.
import { describe, expect, it } from "vitest";
import { shownEndpoint } from "../../src/observability/tracing.js";
import { withoutForeignTraceContext, withTraceContext } from "../../src/proxy/trace.js";

const OURS = {
  traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
  tracestate: undefined,
};

describe("withTraceContext", () => {
  it("replaces the client's traceparent and drops its tracestate, in any case", () => {
    const sent = ["Host", "api", "TraceParent", "00-aaaa-bbbb-01", "tracestate", "vendor=x", "Accept", "*/*"];
    expect(withTraceContext(sent, OURS)).toEqual([
      "Host",
      "api",
      "Accept",
      "*/*",
      "traceparent",
      OURS.traceparent,
    ]);
  });

  it("adds the gateway's to a request without one, and its tracestate when the context has one", () => {
    expect(withTraceContext(["host", "api"], { traceparent: OURS.traceparent, tracestate: "tg=1" })).toEqual([
      "host",
      "api",
      "traceparent",
      OURS.traceparent,
      "tracestate",
      "tg=1",
    ]);
  });

  it("leaves headers whose names only look alike", () => {
    const sent = ["x-traceparent", "1", "traceparents", "2"];
    expect(withTraceContext(sent, OURS)).toEqual([...sent, "traceparent", OURS.traceparent]);
  });
});

describe("withoutForeignTraceContext: an untrusted client's upstream headers", () => {
  it("lose trace context in every other format, in any case; the rest stays in order", () => {
    const sent = [
      "Host",
      "api",
      "Baggage",
      "isAdmin=true",
      "B3",
      "x-y-1",
      "X-B3-Sampled",
      "1",
      "uber-trace-id",
      "a:b:0:1",
      "UberCtx-User",
      "alice",
      "X-Amzn-Trace-Id",
      "Root=1",
      "sentry-trace",
      "a-b-1",
      "x-datadog-trace-id",
      "1",
      "Accept",
      "*/*",
    ];
    expect(withoutForeignTraceContext(sent)).toEqual(["Host", "api", "Accept", "*/*"]);
  });
});

describe("shownEndpoint: the collector's URL in logs and /admin/config", () => {
  it("without user, password or query", () => {
    expect(shownEndpoint("http://user:pw@collector:4318/v1/traces?token=SECRET")).toBe(
      "http://collector:4318/v1/traces?…",
    );
    expect(shownEndpoint("https://collector/v1/traces")).toBe("https://collector/v1/traces");
  });
});
