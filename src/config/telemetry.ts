// `telemetry:`: where the gateway exports OpenTelemetry traces (docs/observability.md). Its own
// file so the schema of one concern reads in one place; schema.ts composes it. Absent: tracing
// is off and nothing of OpenTelemetry is loaded (observability/tracing.ts).
import { z } from "zod";
import type { TraceSettings } from "../model/telemetry.js";
import { duration } from "./scalars.js";

/** What a sampling ratio may be: the share of new traces kept. */
export const SAMPLE_RATIO_PROBLEM =
  "sample is the share of new traces kept: a number from 0.0 (none) to 1.0 (every one), such as 0.1";

const exporterHeaderName = z
  .string()
  .regex(
    /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/,
    "expected a header name (letters, digits and ! # $ % & ' * + . ^ _ ` | ~ -)",
  );

const tracesSchema = z.strictObject({
  endpoint: z
    .url({
      protocol: /^https?$/,
      error:
        "expected the collector's OTLP/HTTP traces URL, such as http://otel-collector:4318/v1/traces (http:// or https://)",
    })
    .describe(
      "the OTLP/HTTP (JSON) traces URL of the collector, such as http://otel-collector:4318/v1/traces; a URL without a path gets /v1/traces",
    ),
  sample: z
    .number({ error: SAMPLE_RATIO_PROBLEM })
    .min(0, SAMPLE_RATIO_PROBLEM)
    .max(1, SAMPLE_RATIO_PROBLEM)
    .default(1)
    .describe(
      "share of new traces kept (0.0 to 1.0, default 1.0); a request whose trusted caller sent a traceparent follows that caller's sampled flag (parent-based)",
    ),
  service_name: z
    .string({ error: "expected the service name the spans are exported under, such as tollgate" })
    .min(1, "the service name is empty: leave it out for tollgate")
    .max(256, "a service name is at most 256 characters")
    .default("tollgate")
    .describe("the service.name resource attribute of every span (default tollgate)"),
  caller_ids: z
    .boolean()
    .default(false)
    .describe(
      "also record who called: tollgate.caller.id (the client id, or the address an anonymous caller is limited by), tollgate.tenant and client.address (default false: spans name routes, plans and limits, never a caller)",
    ),
  headers: z
    .record(exporterHeaderName, z.string({ error: "expected the header's value as a string" }))
    .optional()
    .describe(
      'headers of every export request, such as authorization: "Bearer ${OTLP_TOKEN}"; values are secrets: never logged, shown as set in /admin/config',
    ),
  timeout: duration()
    .refine((ms) => ms >= 100 && ms <= 60_000, "an export's timeout is between 100ms and 60s")
    .default(10_000)
    .describe(
      "how long one export request may take before it is dropped (default 10s); spans never wait for it",
    ),
});

export const telemetrySchema = z
  .strictObject({
    traces: tracesSchema
      .optional()
      .describe("OpenTelemetry traces: a span per request with its limit check and upstream attempts"),
  })
  .optional()
  .describe("OpenTelemetry export (docs/observability.md); off when absent");

export type TracesConfig = z.output<typeof tracesSchema>;

/** The exporter's settings from `telemetry.traces`. */
export function traceSettings(config: TracesConfig): TraceSettings {
  const url = new URL(config.endpoint);
  // OTEL_EXPORTER_OTLP_ENDPOINT's convention: the bare collector address means its traces path.
  if (url.pathname === "/" || url.pathname === "") url.pathname = "/v1/traces";
  return {
    endpoint: url.toString(),
    sample: config.sample,
    serviceName: config.service_name,
    callerIds: config.caller_ids,
    headers: { ...config.headers },
    exportTimeoutMs: config.timeout,
  };
}
