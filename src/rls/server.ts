// The gRPC listener of Envoy's rate-limit service: envoy.service.ratelimit.v3.RateLimitService
// /ShouldRateLimit over cleartext HTTP/2, the protos vendored in proto/ (Apache-2.0). Each call
// reads the current generation once (its rls files, its limiter), decides all of its descriptors
// in one store call through the same deny cache and breaker as the proxy's requests, and when the
// store cannot answer applies rls.on_failure within the store's timeout. Loaded only when `rls`
// is configured: a gateway without it never loads grpc-js.
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import type { Logger } from "pino";
import { storeFailureReason } from "../errors.js";
import type { Limiter } from "../limits/limiter.js";
import type { StoreDecision } from "../limits/spec.js";
import { localSpec } from "../limits/spec.js";
import type { CompiledRuntime } from "../model/runtime.js";
import type { Metrics } from "../observability/metrics.js";
import {
  admittedWithoutStore,
  answer,
  planRequest,
  type RlsPlan,
  type RlsRequest,
  RlsRequestError,
  type RlsResponse,
  refusedWithoutStore,
} from "./decide.js";

/** proto/ at the package's root, from src/rls/ and from dist/rls/ alike. */
const PROTO_DIR = fileURLToPath(new URL("../../proto/", import.meta.url));

/** A request larger than this is refused by grpc-js (RESOURCE_EXHAUSTED): Envoy's are a few hundred bytes. */
const MAX_REQUEST_BYTES = 64 * 1024;

/** A connection without a call for this long is closed; Envoy's carry calls every moment. */
const IDLE_CONNECTION_MS = 5 * 60_000;

/**
 * Calls one connection may have open at once (HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS): Envoy
 * opens another connection when it needs more. Without it a client that opened streams and
 * never finished them held 200,000 on 20 connections (1.4 GB), and real calls timed out.
 */
const MAX_STREAMS_PER_CONNECTION = 100;

/**
 * Every connection is closed (GOAWAY, then cut after the grace) at this age: a call whose
 * request never completes is never seen by the handler, and max_connection_idle does not
 * apply while one is open, so without an age it held its connection forever.
 */
const MAX_CONNECTION_AGE_MS = 5 * 60_000;
const CONNECTION_AGE_GRACE_MS = 10_000;

/** How long a stop waits for calls in flight before cutting them. */
const STOP_GRACE_MS = 2000;

export interface RlsGeneration {
  readonly runtime: Pick<CompiledRuntime, "rls" | "store"> & {
    readonly config: { store: { local_fraction: number } };
  };
  readonly limiter: Pick<Limiter, "checkChecks" | "checkLocally">;
}

export interface RlsServerOptions {
  /** Read once per call and kept to its end, as the proxy reads its generation. */
  generation: () => RlsGeneration;
  metrics: Metrics;
  logger: Logger;
}

export interface RlsServer {
  /** The port bound (0 in the address: the one the system chose). */
  readonly port: number;
  stop(): Promise<void>;
}

let serviceDefinition: grpc.ServiceDefinition | undefined;

// grpc-js writes its own errors to stderr ("E No address added…"); this module reports every
// failure itself, in the gateway's log or its start-up error.
grpc.setLogVerbosity(grpc.logVerbosity.NONE);

/** grpc-js's bind error in an operator's words: it wraps the listen error in its own phrasing. */
function bindFailure(message: string): string {
  if (message.includes("EADDRINUSE")) return "the address is already in use";
  if (message.includes("EACCES")) return "permission denied (a port below 1024 needs privileges)";
  if (message.includes("EADDRNOTAVAIL")) return "no interface has this address";
  return message;
}

/** The service as grpc-js serves it, from the vendored protos (loaded once per process). */
export function rateLimitService(): grpc.ServiceDefinition {
  if (serviceDefinition) return serviceDefinition;
  const definition = protoLoader.loadSync("envoy/service/ratelimit/v3/rls.proto", {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: Number,
    enums: String,
    defaults: false,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as {
    envoy: { service: { ratelimit: { v3: { RateLimitService: { service: grpc.ServiceDefinition } } } } };
  };
  serviceDefinition = pkg.envoy.service.ratelimit.v3.RateLimitService.service;
  return serviceDefinition;
}

export type RlsOutcome =
  | { ok: true; response: RlsResponse; decidedBy: string }
  | { ok: false; code: grpc.status; message: string };

/** One call, decided: the answer or the gRPC error, and what decided it. Never rejects. */
export async function decideCall(
  gen: RlsGeneration,
  request: RlsRequest,
  metrics?: Metrics,
): Promise<RlsOutcome> {
  const rls = gen.runtime.rls;
  if (!rls) {
    return {
      ok: false,
      code: grpc.status.UNAVAILABLE,
      message: "the rate-limit service was removed from the config; restart to stop its listener",
    };
  }
  let plan: RlsPlan;
  try {
    plan = planRequest(rls, gen.runtime.store.prefix, request);
  } catch (err) {
    if (err instanceof RlsRequestError)
      return { ok: false, code: grpc.status.INVALID_ARGUMENT, message: err.message };
    throw err;
  }
  if (plan.checks.length === 0)
    return { ok: true, response: answer(plan, { outcomes: [] }, rls.responseHeaders), decidedBy: "none" };
  let decision: StoreDecision;
  try {
    decision = await gen.limiter.checkChecks(plan.checks);
  } catch (err) {
    const reason = storeFailureReason(err);
    metrics?.storeErrors.labels(reason).inc();
    if (rls.onFailure === "closed")
      return { ok: true, response: refusedWithoutStore(plan), decidedBy: "degraded_closed" };
    if (rls.onFailure === "local") {
      const fraction = gen.runtime.config.store.local_fraction;
      const local = gen.limiter.checkLocally(
        plan.checks.map((c) => ({ ...c, spec: localSpec(c.spec, fraction) })),
      );
      if (local)
        return { ok: true, response: answer(plan, local, rls.responseHeaders), decidedBy: "degraded_local" };
    }
    return { ok: true, response: admittedWithoutStore(plan), decidedBy: "degraded_open" };
  }
  return {
    ok: true,
    response: answer(plan, decision, rls.responseHeaders),
    decidedBy: decision.local ? "deny_cache" : "store",
  };
}

/** Binds `address` (host:port) and serves until stop(). Rejects when the address cannot be bound. */
export async function startRlsServer(address: string, options: RlsServerOptions): Promise<RlsServer> {
  const { metrics, logger } = options;
  const server = new grpc.Server({
    "grpc.max_receive_message_length": MAX_REQUEST_BYTES,
    "grpc.max_send_message_length": 1024 * 1024,
    // A connection with no call for this long is closed (GOAWAY): one opened and left idle
    // holds a socket forever otherwise. Envoy reconnects on its next call.
    "grpc.max_connection_idle_ms": IDLE_CONNECTION_MS,
    "grpc.max_concurrent_streams": MAX_STREAMS_PER_CONNECTION,
    "grpc.max_connection_age_ms": MAX_CONNECTION_AGE_MS,
    "grpc.max_connection_age_grace_ms": CONNECTION_AGE_GRACE_MS,
  });
  server.addService(rateLimitService(), {
    ShouldRateLimit: (
      call: grpc.ServerUnaryCall<RlsRequest, RlsResponse>,
      callback: grpc.sendUnaryData<RlsResponse>,
    ) => {
      decideCall(options.generation(), call.request, metrics).then(
        (outcome) => {
          if (outcome.ok) {
            metrics.rlsDecisions.labels(outcome.response.overall_code.toLowerCase(), outcome.decidedBy).inc();
            callback(null, outcome.response);
          } else {
            metrics.rlsDecisions.labels("invalid", "none").inc();
            callback({ code: outcome.code, details: outcome.message });
          }
        },
        (err: unknown) => {
          // A defect, never the caller's input: said once in the log, answered INTERNAL.
          logger.error({ err: (err as Error).message }, "rate-limit service call failed");
          metrics.rlsDecisions.labels("invalid", "none").inc();
          callback({ code: grpc.status.INTERNAL, details: "internal error" });
        },
      );
    },
  });
  // grpc-js reads `:8081` as no host; the schema allows it for every listener, meaning all interfaces.
  const bindAddress = address.startsWith(":") ? `0.0.0.0${address}` : address;
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(bindAddress, grpc.ServerCredentials.createInsecure(), (err, bound) =>
      err ? reject(new Error(`rls.listen ${address}: ${bindFailure(err.message)}`)) : resolve(bound),
    );
  });
  return {
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        const cut = setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, STOP_GRACE_MS);
        cut.unref();
        server.tryShutdown(() => {
          clearTimeout(cut);
          resolve();
        });
      }),
  };
}
