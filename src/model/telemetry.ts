// The compiled `telemetry:` settings (config/telemetry.ts compiles them; observability/tracing.ts
// exports with them).

/** What the exporter needs, compiled from `telemetry.traces`. */
export interface TraceSettings {
  /** The OTLP/HTTP traces URL, `/v1/traces` added to one written without a path. */
  endpoint: string;
  /** The share of new traces kept (a trusted caller's sampled flag decides its own). */
  sample: number;
  serviceName: string;
  /** Spans may name the caller (tollgate.caller.id, tollgate.tenant, client.address). */
  callerIds: boolean;
  /** Sent with every export request; secrets. */
  headers: Readonly<Record<string, string>>;
  exportTimeoutMs: number;
}
