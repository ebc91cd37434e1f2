// One request, one pass: normalise → route → caller → deny/exempt → limits → 429 | 503 | forward.
// The runtime is read once at the start, so a reload never changes a request half-way.
import { randomUUID } from "node:crypto";
import { type IncomingMessage, type Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { CompiledRoute, Runtime } from "../config/compile.js";
import { formatDuration } from "../config/units.js";
import {
  type Problem,
  problemFor,
  QUOTA_EXCEEDED,
  sendProblem,
  TEMPORARY_REDUCED_CAPACITY,
} from "../http/problem.js";
import { ceilSeconds, rateLimitHeaders } from "../http/ratelimit-headers.js";
import { framingProblem } from "../http/request-framing.js";
import type { AuthFailureThrottle } from "../identity/auth-failures.js";
import {
  type Caller,
  type Identification,
  identifyCaller,
  isBadCredential,
  presentsCredential,
} from "../identity/caller.js";
import { fieldLines, resolveClientIp } from "../identity/forwarded.js";
import { formatIp } from "../identity/ip.js";
import { ipKeyFor, type Peer, socketPeer } from "../identity/peer.js";
import {
  type AppliedLimit,
  callerLabel,
  type DegradedReason,
  type LimitDecision,
  type Limiter,
} from "../limits/limiter.js";
import { type LimitSpec, quota, windowMs } from "../limits/spec.js";
import type { Metrics, RequestDecision } from "../observability/metrics.js";
import { NO_ROUTE } from "../observability/metrics.js";
import type { SustainedDenials } from "../observability/sustained.js";
import { normalizeTarget } from "../routing/normalize.js";
import { forward } from "./forward.js";
import { hasBody, upstreamRequestHeaders } from "./headers.js";
import { extraUnits } from "./post-charge.js";
import { tunnel } from "./tunnel.js";
import {
  closeAfterAnswer,
  type Handshake,
  isWebSocketUpgrade,
  serveWithoutUpgrade,
  watchHandshake,
} from "./upgrade.js";
import type { UpstreamPools } from "./upstreams.js";

/** WebSocket handshakes in flight: their client socket, watched until it is answered. */
const upgrades = new WeakMap<IncomingMessage, { socket: Socket; handshake: Handshake }>();

/**
 * A WebSocket handshake must be decided and answered within this, or its socket is closed: Node
 * no longer applies the server's timeouts to a socket it handed to an 'upgrade' listener.
 */
const HANDSHAKE_TIMEOUT_MS = 60_000;

const EXPECT_CONTINUE = /^100-continue$/i;

/** Responses whose request waits for its 100 Continue: whether the connection may be kept. */
const awaitingContinue = new WeakMap<ServerResponse, boolean>();

type AllowedDecision = Extract<LimitDecision, { kind: "allowed" }>;

/** What the gateway believes of the forwarding headers a request came with. */
interface Trust {
  /** The socket peer is a trusted proxy. */
  peerTrusted: boolean;
  /** The X-Forwarded-For to extend with the peer (see ForwardingContext.forwardedFor). */
  forwardedFor: string | undefined;
}

export interface PipelineDeps {
  runtime: () => Runtime;
  limiter: () => Limiter;
  pools: UpstreamPools;
  metrics: Metrics;
  logger: Logger;
  /** Counts requests in flight, for a graceful shutdown. */
  inFlight: { count: number };
  /** Callers denied without pause (tollgate_sustained_denials). */
  sustained: SustainedDenials;
  /** Open WebSocket tunnels (client sockets), closed by a shutdown after its grace. */
  tunnels: Set<Socket>;
  /** Invalid credentials per client IP (identity.auth_failures); outlives reloads. */
  authFailures: AuthFailureThrottle;
}

const REQUEST_ID = /^[A-Za-z0-9._\-:]{1,128}$/;

const DEGRADED_WHY: Record<DegradedReason, string> = {
  timeout: "the limit store did not answer in time",
  connection: "the limit store is unreachable",
  script: "the limit store refused the check",
  breaker_open: "the limit store is failing and is not being asked for a while",
};

interface RequestLog {
  requestId: string;
  method: string;
  path: string;
  route: string;
  callerKind?: string;
  callerId?: string;
  decision: RequestDecision;
  status: number;
  startedAt: number;
  checkMs?: number;
  /** How long a leaky bucket held the request before forwarding it. */
  queuedMs?: number;
  upstreamMs?: number;
  /** Set once the request is answered and counted, so nothing counts it twice. */
  done: boolean;
}

export function createPipeline(deps: PipelineDeps) {
  const { metrics, logger } = deps;

  const complete = (rt: Runtime, log: RequestLog) => {
    if (log.done) return;
    log.done = true;
    deps.inFlight.count--;
    metrics.countRequest(log.route, log.decision);
    if (!rt.config.log.requests) return;
    logger.info(
      {
        request_id: log.requestId,
        method: log.method,
        path: log.path,
        route: log.route || null,
        caller_kind: log.callerKind ?? null,
        caller_id: log.callerId ?? null,
        decision: log.decision,
        status: log.status,
        check_ms: log.checkMs,
        queued_ms: log.queuedMs,
        upstream_ms: log.upstreamMs,
        duration_ms: round(performance.now() - log.startedAt),
      },
      "request",
    );
  };

  const reject = (
    rt: Runtime,
    res: ServerResponse,
    log: RequestLog,
    decision: RequestDecision,
    code: Parameters<typeof problemFor>[0],
    detail: string,
    headers: Record<string, string> = {},
  ) => {
    const problem = problemFor(code, detail);
    log.decision = decision;
    log.status = problem.status;
    headers["x-request-id"] = log.requestId;
    sendProblem(res, problem, headers);
    complete(rt, log);
  };

  /**
   * A bug or an unexpected throw must cost one request, never the process: answer 500 (or cut
   * the response if it started) and keep the in-flight count honest for shutdown.
   */
  const guarded = (rt: Runtime, res: ServerResponse, log: RequestLog, work: () => void) => {
    try {
      work();
    } catch (err) {
      logger.error({ err, request_id: log.requestId }, "request handler failed");
      if (!log.done)
        reject(rt, res, log, "internal_error", "internal_error", "the gateway failed to handle this request");
    }
  };

  /**
   * An `Upgrade` request. A WebSocket handshake goes through the same pipeline, answered on a
   * response bound to the raw socket, and is tunnelled instead of forwarded once admitted; any
   * answer other than a tunnel closes the socket. Every other upgrade (h2c, …) is served as the
   * plain HTTP/1.1 request it also is.
   */
  function handleUpgrade(req: IncomingMessage, socket: Socket, head: Buffer, server: Server): void {
    if (!isWebSocketUpgrade(req)) {
      serveWithoutUpgrade(server, req, socket, head);
      return;
    }
    socket.setTimeout(HANDSHAKE_TIMEOUT_MS, () => socket.destroy());
    const res = new ServerResponse(req);
    res.assignSocket(socket);
    res.shouldKeepAlive = false;
    res.once("finish", () => closeAfterAnswer(socket));
    upgrades.set(req, { socket, handshake: watchHandshake(socket, head) });
    handle(req, res);
  }

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const rt = deps.runtime();
    deps.inFlight.count++;
    const incomingId = req.headers["x-request-id"];
    const log: RequestLog = {
      requestId: typeof incomingId === "string" && REQUEST_ID.test(incomingId) ? incomingId : randomUUID(),
      method: req.method ?? "GET",
      path: "",
      route: NO_ROUTE,
      decision: "allowed",
      status: 0,
      startedAt: performance.now(),
      done: false,
    };
    guarded(rt, res, log, () => handleRequest(rt, req, res, log));
  }

  /**
   * CONNECT: a gateway in front of APIs is no forward proxy. Node would close the socket without
   * a word (nothing answered, logged or counted); it gets a 405 problem and the socket is closed.
   */
  function handleConnect(req: IncomingMessage, socket: Socket): void {
    const res = new ServerResponse(req);
    res.assignSocket(socket);
    res.shouldKeepAlive = false;
    res.once("finish", () => closeAfterAnswer(socket));
    handle(req, res);
  }

  return { handle, handleUpgrade, handleConnect };

  function handleRequest(rt: Runtime, req: IncomingMessage, res: ServerResponse, log: RequestLog): void {
    if (req.method === "CONNECT") {
      reject(
        rt,
        res,
        log,
        "bad_request",
        "method_not_allowed",
        "CONNECT is not served: this gateway is not a forward proxy",
        {
          allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS",
          connection: "close",
        },
      );
      return;
    }
    const framing = framingProblem(req.rawHeaders, req.headers, req.httpVersionMajor, req.httpVersionMinor);
    if (framing) {
      reject(rt, res, log, "bad_request", framing.code, framing.detail, { connection: "close" });
      return;
    }
    // The server has a checkContinue listener, so Node never answers 100 Continue by itself:
    // the body is invited only once the request is admitted (forwardAllowed). Until then the
    // connection is marked to close, so a refusal does not read a body the client may still
    // send; an admitted request gets its keep-alive back with the 100.
    if (req.headers.expect !== undefined && EXPECT_CONTINUE.test(req.headers.expect)) {
      awaitingContinue.set(res, res.shouldKeepAlive);
      res.shouldKeepAlive = false;
    }
    const target = normalizeTarget(req.url ?? "/");
    if (!target.ok) {
      reject(rt, res, log, "bad_request", "bad_path", `the request path cannot be used: ${target.reason}`);
      return;
    }
    log.path = target.path;
    const route = rt.routes.match(target.matchPath, log.method);
    if (!route) {
      reject(rt, res, log, "no_route", "no_route", `no route matches ${log.method} ${target.path}`);
      return;
    }
    log.route = route.name;

    const peer = socketPeer(req.socket);
    if (!peer) {
      reject(rt, res, log, "bad_request", "bad_request", "the connection has no usable peer address");
      return;
    }
    const peerTrusted =
      rt.identity.trustedProxies.size > 0 && rt.identity.trustedProxies.contains(peer.bytes);
    const ip = peerTrusted
      ? resolveClientIp(
          peer.bytes,
          // Forwarded is read line by line: a client's malformed line cannot reach into the
          // line its proxy appended.
          rt.identity.clientIpHeader === "forwarded"
            ? fieldLines(req.rawHeaders, "forwarded")
            : headerText(req.headers["x-forwarded-for"]),
          rt.identity.clientIpHeader,
          rt.identity.trustedProxies,
        )
      : peer.bytes;
    const ipKey = ipKeyFor(ip, peer, rt.identity.ipv6Prefix);
    const trust: Trust = {
      peerTrusted,
      forwardedFor: !peerTrusted
        ? undefined
        : rt.identity.clientIpHeader === "x-forwarded-for"
          ? headerText(req.headers["x-forwarded-for"])
          : ip === peer.bytes
            ? undefined
            : formatIp(ip),
    };
    const authFailures = rt.identity.authFailures;
    // A denied address is refused before its credential is read: answering 401 or 403 by the
    // key would let it tell valid keys from invalid ones.
    if (rt.deny.ips.contains(ip)) {
      reject(rt, res, log, "caller_denied", "caller_denied", "this caller is not allowed to use this API");
      return;
    }

    const withCaller = (identified: Identification): void => {
      if (!identified.ok) {
        if (authFailures && isBadCredential(identified.reason)) {
          deps.authFailures.recordFailure(ipKey, authFailures.windowMs, Date.now());
          metrics.authFailures.labels(identified.reason).inc();
        }
        reject(rt, res, log, "unauthorized", "unauthorized", identified.detail);
        return;
      }
      const caller = identified.caller;
      log.callerKind = caller.kind;
      log.callerId = caller.kind === "client" ? caller.id : caller.ipKey;

      if (caller.kind === "client" && rt.deny.clients.has(caller.id)) {
        reject(rt, res, log, "caller_denied", "caller_denied", "this caller is not allowed to use this API");
        return;
      }
      const exempt =
        rt.exempt.ips.contains(ip) || (caller.kind === "client" && rt.exempt.clients.has(caller.id));

      // A body announced larger than the route takes is refused before it costs any limit.
      if (route.maxBody !== undefined && Number(req.headers["content-length"] ?? 0) > route.maxBody) {
        reject(
          rt,
          res,
          log,
          "bad_request",
          "body_too_large",
          `the request body is larger than ${route.maxBody} bytes, this route's max_body`,
          { connection: "close" },
        );
        return;
      }

      const proceed = (decision: LimitDecision) => {
        const responseHeaders: Record<string, string> = { "x-request-id": log.requestId };
        // on_failure: local decided in-process: a real decision, but say it is degraded.
        if ((decision.kind === "allowed" || decision.kind === "denied") && decision.degraded) {
          metrics.storeErrors.labels(decision.degraded).inc();
          responseHeaders["x-ratelimit-degraded"] = "true";
        }
        switch (decision.kind) {
          case "denied": {
            if (decision.local) metrics.localDenials.inc();
            deps.sustained.denied(callerLabel(caller), Date.now());
            sendTooMany(rt, res, log, decision, responseHeaders);
            return;
          }
          case "degraded":
            metrics.storeErrors.labels(decision.reason).inc();
            responseHeaders["x-ratelimit-degraded"] = "true";
            if (decision.policy === "closed") {
              sendUnavailable(rt, res, log, decision.reason, responseHeaders);
              return;
            }
            log.decision = "degraded_open";
            break;
          case "allowed":
            rateLimitHeaders(decision.applied, rt.headerStyles, Date.now(), responseHeaders);
            log.decision = decision.degraded
              ? "degraded_local"
              : decision.shadowLimited
                ? "shadow_limited"
                : "allowed";
            if (nearLimit(decision.applied)) metrics.countNearLimit(route.name);
            break;
          case "unlimited":
            log.decision = exempt ? "exempt" : "allowed";
            break;
        }
        const allowed = decision.kind === "allowed" ? decision : null;
        const send = () =>
          forwardAllowed(
            rt,
            req,
            res,
            log,
            route,
            caller,
            peer,
            trust,
            target.path + target.query,
            responseHeaders,
            allowed,
            route.hideCredentials ? hiddenCredentials(rt, req, identified.credentialHeader) : undefined,
          );
        if (allowed && allowed.delayMs > 0) waitForSlot(rt, res, log, allowed, send);
        else send();
      };

      if (exempt) {
        proceed({ kind: "unlimited" });
        return;
      }
      const checkStart = performance.now();
      deps
        .limiter()
        .check(caller, route)
        .then(
          (decision) =>
            guarded(rt, res, log, () => {
              const seconds = (performance.now() - checkStart) / 1000;
              metrics.checkDuration.observe(seconds);
              log.checkMs = round(seconds * 1000);
              proceed(decision);
            }),
          (err: unknown) =>
            guarded(rt, res, log, () => {
              // Limiter.check returns store failures as decisions; reaching here is a bug.
              // Answer anyway.
              logger.error({ err, request_id: log.requestId }, "limit check failed unexpectedly");
              proceed({
                kind: "degraded",
                reason: "connection",
                policy: route.onFailure === "closed" ? "closed" : "open",
                error: err as Error,
              });
            }),
        );
    };

    // An address that presented too many bad credentials is refused before its next one is
    // even read: no key lookup, no JWT signature check.
    if (authFailures && presentsCredential(req.headers, rt)) {
      const blockedMs = deps.authFailures.blockedForMs(
        ipKey,
        authFailures.limit,
        authFailures.windowMs,
        Date.now(),
      );
      if (blockedMs > 0) {
        metrics.authFailures.labels("throttled").inc();
        sendAuthThrottled(rt, res, log, blockedMs, authFailures.limit);
        return;
      }
    }
    const identifying = identifyCaller(req.headers, ipKey, rt);
    if (identifying instanceof Promise) {
      identifying.then(
        (identified) => guarded(rt, res, log, () => withCaller(identified)),
        (err: unknown) =>
          guarded(rt, res, log, () => {
            throw err;
          }),
      );
    } else {
      withCaller(identifying);
    }
  }

  /**
   * A leaky bucket gave the request a slot `delayMs` from now: hold it until then. A client
   * that leaves while queued is never forwarded (its slot is not given back: later requests
   * were already placed behind it).
   */
  function waitForSlot(
    rt: Runtime,
    res: ServerResponse,
    log: RequestLog,
    decision: AllowedDecision,
    send: () => void,
  ) {
    log.queuedMs = decision.delayMs;
    const onGone = () => {
      clearTimeout(timer);
      log.status = 499;
      releaseLeases(log, decision);
      complete(rt, log);
    };
    const timer = setTimeout(() => {
      res.off("close", onGone);
      send();
    }, decision.delayMs);
    res.once("close", onGone);
  }

  /** Gives back the request's concurrency leases; a failure leaves them to expire. */
  function releaseLeases(log: RequestLog, decision: AllowedDecision | null) {
    decision?.release?.().then((r) => {
      if (r.ok) return;
      metrics.storeErrors.labels(r.reason).inc();
      logger.warn(
        { request_id: log.requestId, reason: r.reason },
        "concurrency lease not released; it will expire",
      );
    });
  }

  function sendTooMany(
    rt: Runtime,
    res: ServerResponse,
    log: RequestLog,
    decision: Extract<LimitDecision, { kind: "denied" }>,
    headers: Record<string, string>,
  ) {
    const retryAfter = ceilSeconds(decision.retryAfterMs, 1);
    rateLimitHeaders(decision.applied, rt.headerStyles, Date.now(), headers);
    const described = decision.violated.map((v) => describeLimit(v.spec)).join("; ");
    sendQuotaExceeded(rt, res, log, "limited", retryAfter, headers, {
      detail: `Rate limit exceeded: ${described}. Retry in ${retryAfter} s.`,
      "violated-policies": decision.violated.map((v) => v.spec.name),
    });
  }

  /** Too many invalid credentials from this address: refused before its credential is read. */
  function sendAuthThrottled(
    rt: Runtime,
    res: ServerResponse,
    log: RequestLog,
    blockedMs: number,
    limit: number,
  ) {
    const retryAfter = ceilSeconds(blockedMs, 1);
    sendQuotaExceeded(
      rt,
      res,
      log,
      "auth_throttled",
      retryAfter,
      { "x-request-id": log.requestId },
      {
        detail: `More than ${limit} invalid credentials came from this address; credentials from it are refused for ${retryAfter} s.`,
      },
    );
  }

  /** A 429 with the quota-exceeded problem, Retry-After, and the body fields every 429 has. */
  function sendQuotaExceeded(
    rt: Runtime,
    res: ServerResponse,
    log: RequestLog,
    decision: RequestDecision,
    retryAfter: number,
    headers: Record<string, string>,
    body: { detail: string; "violated-policies"?: string[] },
  ) {
    headers["retry-after"] = String(retryAfter);
    log.decision = decision;
    log.status = 429;
    const problem: Problem = {
      type: QUOTA_EXCEEDED,
      title: "Too Many Requests",
      status: 429,
      detail: body.detail,
    };
    if (body["violated-policies"]) problem["violated-policies"] = body["violated-policies"];
    problem.retry_after_seconds = retryAfter;
    sendProblem(res, problem, headers);
    complete(rt, log);
  }

  function sendUnavailable(
    rt: Runtime,
    res: ServerResponse,
    log: RequestLog,
    reason: DegradedReason,
    headers: Record<string, string>,
  ) {
    log.decision = "degraded_closed";
    log.status = 503;
    headers["retry-after"] = "1";
    sendProblem(
      res,
      {
        type: TEMPORARY_REDUCED_CAPACITY,
        title: "Service Unavailable",
        status: 503,
        detail: `Rate limits cannot be checked right now (${DEGRADED_WHY[reason]}), and this route fails closed. Retry shortly.`,
        retry_after_seconds: 1,
      },
      headers,
    );
    complete(rt, log);
  }

  function forwardAllowed(
    rt: Runtime,
    req: IncomingMessage,
    res: ServerResponse,
    log: RequestLog,
    route: CompiledRoute,
    caller: Caller,
    peer: Peer,
    { peerTrusted, forwardedFor }: Trust,
    pathAndQuery: string,
    responseHeaders: Record<string, string>,
    decision: AllowedDecision | null,
    hidden: readonly string[] | undefined,
  ) {
    // Only requests decided by the shared store are post-charged there.
    const chargeable = decision && !decision.degraded ? decision : null;
    const upstream = route.upstream;
    const headers = upstreamRequestHeaders(req.rawHeaders, req.headers, {
      upstreamHost: upstream.host,
      peer: peer.text,
      peerTrusted,
      forwardedFor,
      requestId: log.requestId,
      keyHeader: rt.identity.header,
      hidden,
      identity: {
        client: caller.kind === "client" ? caller.id : undefined,
        tenant: caller.kind === "client" ? caller.tenant : undefined,
        plan: caller.plan?.name,
      },
    });
    const started = performance.now();
    const upgrade = upgrades.get(req);
    if (upgrade) {
      tunnel({
        upstream,
        req,
        res,
        socket: upgrade.socket,
        handshake: upgrade.handshake,
        method: log.method,
        path: upstream.basePath + pathAndQuery,
        headers,
        responseHeaders,
        open: deps.tunnels,
        idleTimeoutMs: rt.config.tunnel_idle_timeout,
        onDone: (result) => {
          // A concurrency slot is held for the life of the socket.
          releaseLeases(log, decision);
          if (result.failure) metrics.upstreamErrors.labels(upstream.name, result.failure).inc();
          log.upstreamMs = round(performance.now() - started);
          log.status = result.status;
          complete(rt, log);
        },
      });
      return;
    }
    // Admitted: now the body may come (Expect: 100-continue, see handleRequest).
    const keepAlive = awaitingContinue.get(res);
    if (keepAlive !== undefined) {
      awaitingContinue.delete(res);
      res.shouldKeepAlive = keepAlive;
      res.writeContinue();
    }
    forward({
      pool: deps.pools.get(upstream),
      upstream,
      req,
      res,
      method: log.method,
      path: upstream.basePath + pathAndQuery,
      headers,
      withBody: hasBody(req.headers),
      maxBody: route.maxBody,
      responseHeaders,
      holdHead: chargeable
        ? (upstreamHeaders) => {
            const extra = extraUnits(upstreamHeaders["tollgate-cost"], route.cost);
            if (extra === 0) return null;
            return deps
              .limiter()
              .postCharge(chargeable.checks, extra)
              .then((r) => {
                if (r.ok) {
                  // The client sees what is left after the real cost, not before it.
                  const after = chargeable.applied.map((a, i) => ({
                    spec: a.spec,
                    outcome: {
                      allowed: a.outcome.allowed,
                      remaining: r.charged[i]!.remaining,
                      resetMs: r.charged[i]!.resetMs,
                      retryAfterMs: a.outcome.retryAfterMs,
                    },
                  }));
                  rateLimitHeaders(after, rt.headerStyles, Date.now(), responseHeaders);
                  return;
                }
                metrics.storeErrors.labels(r.reason).inc();
                logger.warn(
                  { request_id: log.requestId, units: extra, reason: r.reason },
                  "post-charge not recorded",
                );
              });
          }
        : undefined,
      onDone: (result) => {
        releaseLeases(log, decision);
        const seconds = (performance.now() - started) / 1000;
        metrics.observeUpstream(upstream.name, seconds);
        if (result.failure) metrics.upstreamErrors.labels(upstream.name, result.failure).inc();
        log.upstreamMs = round(seconds * 1000);
        log.status = result.status;
        complete(rt, log);
      },
    });
  }
}

/** A limit's description in a 429 never changes: built once per spec (specs are immutable). */
const descriptions = new WeakMap<LimitSpec, string>();
function describeLimit(spec: LimitSpec): string {
  let text = descriptions.get(spec);
  if (text === undefined) {
    text = describeLimitText(spec);
    descriptions.set(spec, text);
  }
  return text;
}

function describeLimitText(spec: LimitSpec): string {
  const over = formatDuration(Math.round(windowMs(spec)));
  switch (spec.algorithm) {
    case "token_bucket":
      return `"${spec.name}" allows ${spec.burst} requests, refilled over ${over}`;
    case "leaky_bucket":
      return `"${spec.name}" serves one request every ${formatDuration(Math.round(spec.intervalMs))} and queues ${spec.queue}; the queue is full`;
    case "concurrency":
      return `"${spec.name}" allows ${spec.maxInFlight} requests in flight at once`;
    default:
      return `"${spec.name}" allows ${spec.limit} requests per ${over}`;
  }
}

/** Whether the request left less than 20 % of any limit it was admitted under. */
function nearLimit(applied: readonly AppliedLimit[]): boolean {
  for (const a of applied) if (!a.spec.shadow && a.outcome.remaining < 0.2 * quota(a.spec)) return true;
  return false;
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}

/**
 * The headers `hide_credentials` removes: the API key header always (an unknown key let through
 * as anonymous is still a key), and Authorization when it was the credential the gateway read:
 * beside an API key header it was not read (the key wins) and is the upstream's.
 */
function hiddenCredentials(
  rt: Runtime,
  req: IncomingMessage,
  credentialHeader: string | undefined,
): string[] {
  const hidden = [rt.identity.header];
  if (
    credentialHeader === "authorization" ||
    (req.headers[rt.identity.header] === undefined &&
      presentsCredential({ authorization: req.headers.authorization }, rt))
  )
    hidden.push("authorization");
  return hidden;
}
