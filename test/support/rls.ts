// A client of Envoy's rate-limit service as Envoy is one: grpc-js over cleartext HTTP/2, with the
// protos vendored in proto/ (the same files the gateway serves, loaded independently here).
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";

const PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));

export interface Descriptor {
  entries: { key: string; value: string }[];
  limit?: { requests_per_unit: number; unit: string };
  hits_addend?: { value: number };
}

export interface RlsReply {
  overall_code: "OK" | "OVER_LIMIT" | "UNKNOWN";
  statuses: {
    code: string;
    current_limit?: { name?: string; requests_per_unit?: number; unit: string };
    limit_remaining?: number;
    duration_until_reset?: { seconds?: number };
  }[];
  response_headers_to_add?: { key: string; value: string }[];
}

export interface RlsClient {
  ask(domain: string, descriptors: Descriptor[], hitsAddend?: number): Promise<RlsReply>;
  close(): void;
}

type Unary = (
  req: unknown,
  opts: { deadline: Date },
  cb: (err: grpc.ServiceError | null, res: RlsReply) => void,
) => void;

export function rlsClient(address: string): RlsClient {
  const definition = protoLoader.loadSync("envoy/service/ratelimit/v3/rls.proto", {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: grpc.ServiceClientConstructor } } } };
  };
  const Client = pkg.envoy.service.ratelimit.v3.RateLimitService;
  const client = new Client(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & {
    ShouldRateLimit: Unary;
  };
  return {
    ask: (domain, descriptors, hitsAddend = 0) =>
      new Promise((resolve, reject) =>
        client.ShouldRateLimit(
          { domain, descriptors, hits_addend: hitsAddend },
          { deadline: new Date(Date.now() + 5000) },
          (err, res) => (err ? reject(err) : resolve(res)),
        ),
      ),
    close: () => client.close(),
  };
}

/** Waits so that the next `seconds` do not cross a boundary of a window `windowSeconds` long. */
export async function awayFromWindowEdge(windowSeconds: number, seconds: number): Promise<void> {
  const into = Date.now() % (windowSeconds * 1000);
  const left = windowSeconds * 1000 - into;
  if (left < seconds * 1000) await new Promise((r) => setTimeout(r, left + 50));
}
