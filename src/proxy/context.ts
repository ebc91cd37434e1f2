// What one request carries through the stages (admit → decide → respond | forward): built once
// when it arrives, filled in by admit, read by the rest, and logged once when it ends.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { ModelPrice } from "../ai/prices.js";
import type { AiRequest } from "../ai/request.js";
import type { Alerts } from "../alerts/alerts.js";
import type { CompiledRoute, Runtime } from "../config/compile.js";
import type { ProblemCode } from "../http/problem.js";
import type { StoredKeyLookup } from "../identity/api-key.js";
import type { AuthFailureThrottle } from "../identity/auth-failures.js";
import type { Caller } from "../identity/caller.js";
import type { Peer } from "../identity/peer.js";
import type { BudgetReservation } from "../limits/budget-reservation.js";
import type { Limiter } from "../limits/limiter.js";
import { type Metrics, NO_ROUTE, type RequestDecision } from "../observability/metrics.js";
import type { SustainedDenials } from "../observability/sustained.js";
import type { RequestTrace, Tracing } from "../observability/tracing.js";
import type { UsageLedger } from "../usage/ledger.js";
import type { BodyMemory } from "./body-memory.js";
import type { CallerShares } from "./caller-share.js";
import type { Handshake } from "./upgrade.js";

/**
 * What a request asks of the limiter: a decision, and a post-charge (or an AI request's
 * settlement) once the upstream answered.
 */
export type RequestLimiter = Pick<Limiter, "check" | "postCharge" | "settle"> &
  Partial<Pick<Limiter, "knownDenial">>;

/**
 * One config generation: the runtime and the limiter built for it. The gateway swaps the whole
 * generation by one assignment on reload; a request reads it once when it arrives and keeps it to
 * its end (its post-charge included), so a reload never changes a request half-way.
 */
export interface Generation<L extends RequestLimiter = RequestLimiter> {
  readonly runtime: Runtime;
  readonly limiter: L;
  /** Where budgeted requests record their usage (src/usage/ledger.ts); absent: nowhere. */
  readonly usage?: UsageRecorder;
  /** Where budget alerts are raised (src/alerts/alerts.ts); absent: nowhere. */
  readonly alerts?: Pick<Alerts, "raise">;
}

/** What the request path asks of the usage ledger. */
export type UsageRecorder = Pick<UsageLedger, "record">;

/** Clocks, injected so the stages can be driven without the wall clock. */
export interface Clock {
  /** Epoch ms: rate-limit reset headers, the auth-failure throttle, sustained denials. */
  now(): number;
  /** Monotonic ms: durations (check, queue, upstream, the whole request). */
  monotonic(): number;
}

export const SYSTEM_CLOCK: Clock = { now: Date.now, monotonic: () => performance.now() };

/** What every stage shares across requests; outlives reloads. */
export interface ProxyEnv {
  metrics: Metrics;
  logger: Logger;
  /** Counts requests in flight, for a graceful shutdown. */
  inFlight: { count: number };
  /** Callers denied without pause (tollgate_sustained_denials). */
  sustained: SustainedDenials;
  /** Invalid credentials per client IP (identity.auth_failures); outlives reloads. */
  authFailures: AuthFailureThrottle;
  clock: Clock;
  /** What AI bodies being read hold (body-memory.ts); outlives reloads. */
  bodyMemory: BodyMemory;
  /** What each caller holds of each upstream's connections (caller-share.ts); outlives reloads. */
  callerShares: CallerShares;
  /** Keys issued at runtime (operator-state/api-key-lookup.ts); undefined: the YAML's keys only. */
  storedKeys?: StoredKeyLookup<Runtime> | undefined;
  /** `telemetry.traces` (observability/tracing.ts); undefined: tracing is off. */
  tracing?: Tracing | undefined;
}

/** An AI route's request, read (proxy/ai-body.ts): what it asks, what it costs, what it reserves. */
export interface AiExchange {
  /** The request read; dropped (null) once forwarded, so a long answer does not hold its body. */
  request: AiRequest | null;
  /** Its model's prices, when a money budget applies to it. */
  readonly price: ModelPrice | undefined;
  readonly reservation: BudgetReservation;
}

/** A WebSocket handshake's client socket, watched until it is answered. */
export interface UpgradeSocket {
  socket: Socket;
  handshake: Handshake;
}

/**
 * A request the gateway refuses before any limit is asked, answered with a problem from the
 * table (respond.ts). One class, so every refusal has the same shape.
 */
export class Refusal {
  constructor(
    readonly code: ProblemCode,
    /** The label of tollgate_requests_total and the log line. */
    readonly decision: RequestDecision,
    readonly detail: string,
    /** Added to the answer (Allow, Connection: close). */
    readonly headers?: Readonly<Record<string, string>>,
    /** A 429's wait: Retry-After and the body's retry_after_seconds. */
    readonly retryAfterSeconds?: number,
  ) {}
}

/**
 * The request. Every field exists from construction (one shape for V8); admit fills the
 * identity ones, then an `Admitted` view is what decide and forward work with.
 */
export class RequestContext {
  readonly gen: Generation;
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly requestId: string;
  readonly method: string;
  readonly startedAt: number;
  /** A WebSocket handshake: tunnelled instead of forwarded once admitted. */
  readonly upgrade: UpgradeSocket | undefined;
  /** The scheme the client spoke to the gateway: X-Forwarded-Proto unless a trusted proxy says. */
  scheme: "http" | "https" = "http";

  /** The normalised path (logged), and the path + query sent upstream after its base path. */
  path = "";
  /** The query string as received (`?a=1`) or empty: what `by: query:<name>` limits read. */
  query = "";
  pathAndQuery = "";
  route: CompiledRoute | undefined = undefined;
  /** The route's name, or NO_ROUTE: the label of its metrics. */
  routeName = NO_ROUTE;
  peer: Peer | undefined = undefined;
  /** The socket peer is a trusted proxy: its forwarding headers are believed. */
  peerTrusted = false;
  /** The X-Forwarded-For to extend with the peer (see upstreamRequestHeaders). */
  forwardedFor: string | undefined = undefined;
  /** The client's address: the peer, or what trusted proxies say it is. */
  ip: Uint8Array | undefined = undefined;
  ipKey = "";
  caller: Caller | undefined = undefined;
  /** The header the caller was identified by, for `hide_credentials`. */
  credentialHeader: string | undefined = undefined;
  exempt = false;
  /**
   * Set while an `Expect: 100-continue` request waits for its 100: whether its connection may
   * be kept alive once admitted (it is marked to close until then).
   */
  keepAliveAfterContinue: boolean | undefined = undefined;
  /** Added to whatever the client gets: request id, rate-limit headers, X-RateLimit-Degraded. */
  readonly responseHeaders: Record<string, string>;

  // The log line and metrics (respond.ts `complete`).
  decision: RequestDecision = "allowed";
  status = 0;
  /** When the limiter was asked (monotonic ms), for check_ms. */
  checkStartedAt = 0;
  checkMs: number | undefined = undefined;
  /** How long a leaky bucket held the request before forwarding it. */
  queuedMs: number | undefined = undefined;
  upstreamMs: number | undefined = undefined;
  /**
   * Why the upstream exchange failed (stream.ts UpstreamFailure): the only record of a response
   * cut after its head went out with its status (a deadline passed mid-body, a reset).
   */
  upstreamError: string | undefined = undefined;
  /** Set once the request is answered and counted, so nothing counts it twice. */
  done = false;
  /** An AI route's operation, read before its limits are asked; undefined elsewhere. */
  ai: AiExchange | undefined = undefined;
  /**
   * Gives back what an AI body being read holds of the process's body memory (body-memory.ts);
   * called once the request is forwarded or answered.
   */
  releaseBody: (() => void) | undefined = undefined;
  /** The upstream whose caller_share slot this request holds (pipeline.ts), given back by complete(). */
  shareHeld: string | undefined = undefined;
  /** The request's trace (proxy/trace.ts); undefined with tracing off. */
  trace: RequestTrace | undefined = undefined;

  /** The request's headers: with `path` and `query`, what keyed limits read (limits/key-by.ts). */
  get headers(): IncomingMessage["headers"] {
    return this.req.headers;
  }

  /** An AI request's body members, which `body:<field>` keys read. */
  get body(): Readonly<Record<string, unknown>> | undefined {
    return this.ai?.request?.keyFields;
  }

  constructor(
    gen: Generation,
    req: IncomingMessage,
    res: ServerResponse,
    requestId: string,
    startedAt: number,
    upgrade?: UpgradeSocket,
  ) {
    this.gen = gen;
    this.req = req;
    this.res = res;
    this.requestId = requestId;
    this.method = req.method ?? "GET";
    this.startedAt = startedAt;
    this.upgrade = upgrade;
    this.responseHeaders = { "x-request-id": requestId };
  }
}

/** A request admit let through: its route, peer, address and caller are known. */
export type Admitted = RequestContext & {
  readonly route: CompiledRoute;
  readonly peer: Peer;
  readonly ip: Uint8Array;
  readonly caller: Caller;
};
