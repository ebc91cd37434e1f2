// A collector for tests: an HTTP server on port 0 that accepts OTLP/HTTP JSON trace exports
// (POST /v1/traces, ExportTraceServiceRequest in the protobuf JSON mapping) and decodes each
// span, its attributes and links into plain values. Anything else is answered 400 and counted,
// so an exporter speaking another encoding fails the test instead of passing it quietly.
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";

export type AttributeValue = string | number | boolean | AttributeValue[] | null;

export interface CollectedSpan {
  traceId: string;
  spanId: string;
  /** "" for a root span. */
  parentSpanId: string;
  name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kind: number;
  attributes: Record<string, AttributeValue>;
  links: { traceId: string; spanId: string; attributes: Record<string, AttributeValue> }[];
  status: { code: number; message?: string };
  resource: Record<string, AttributeValue>;
  startNs: bigint;
  endNs: bigint;
}

export interface Collector {
  url: string;
  spans: CollectedSpan[];
  /** Each export request's headers. */
  requests: IncomingHttpHeaders[];
  rejected: number;
  close(): Promise<void>;
}

export const SPAN_KIND = { internal: 1, server: 2, client: 3 } as const;

interface OtlpAnyValue {
  stringValue?: string;
  boolValue?: boolean;
  intValue?: string | number;
  doubleValue?: number;
  arrayValue?: { values?: OtlpAnyValue[] };
}
interface OtlpKeyValue {
  key: string;
  value: OtlpAnyValue;
}

function decodeValue(v: OtlpAnyValue): AttributeValue {
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.doubleValue !== undefined) return v.doubleValue;
  if (v.arrayValue !== undefined) return (v.arrayValue.values ?? []).map(decodeValue);
  return null;
}

function decodeAttributes(list: OtlpKeyValue[] | undefined): Record<string, AttributeValue> {
  return Object.fromEntries((list ?? []).map((kv) => [kv.key, decodeValue(kv.value)]));
}

/** OTLP JSON writes ids as hex; an id in base64 (the protobuf default) is turned into hex. */
function hexId(id: string | undefined): string {
  if (!id) return "";
  return /^[0-9a-f]+$/.test(id) ? id : Buffer.from(id, "base64").toString("hex");
}

export function decodeExport(body: unknown): CollectedSpan[] {
  const out: CollectedSpan[] = [];
  const request = body as {
    resourceSpans?: {
      resource?: { attributes?: OtlpKeyValue[] };
      scopeSpans?: {
        spans?: {
          traceId: string;
          spanId: string;
          parentSpanId?: string;
          name: string;
          kind: number;
          attributes?: OtlpKeyValue[];
          links?: { traceId: string; spanId: string; attributes?: OtlpKeyValue[] }[];
          status?: { code?: number; message?: string };
          startTimeUnixNano: string | number;
          endTimeUnixNano: string | number;
        }[];
      }[];
    }[];
  };
  for (const rs of request.resourceSpans ?? []) {
    const resource = decodeAttributes(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        out.push({
          traceId: hexId(s.traceId),
          spanId: hexId(s.spanId),
          parentSpanId: hexId(s.parentSpanId),
          name: s.name,
          kind: s.kind,
          attributes: decodeAttributes(s.attributes),
          links: (s.links ?? []).map((l) => ({
            traceId: hexId(l.traceId),
            spanId: hexId(l.spanId),
            attributes: decodeAttributes(l.attributes),
          })),
          status: { code: s.status?.code ?? 0, message: s.status?.message },
          resource,
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
        });
      }
    }
  }
  return out;
}

export async function startCollector(): Promise<Collector> {
  const state: Collector = { url: "", spans: [], requests: [], rejected: 0, close: async () => {} };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const json = /^application\/json\b/.test(req.headers["content-type"] ?? "");
      if (req.method !== "POST" || req.url !== "/v1/traces" || !json) {
        state.rejected++;
        res.writeHead(400).end();
        return;
      }
      state.requests.push(req.headers);
      state.spans.push(...decodeExport(JSON.parse(Buffer.concat(chunks).toString("utf8"))));
      res.writeHead(200, { "content-type": "application/json" }).end("{}");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
