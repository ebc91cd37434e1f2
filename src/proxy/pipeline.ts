// One request, one pass: admit → decide → respond (429 | 503 | any refusal) or forward. The
// generation (runtime + limiter) is read once when the request arrives, so a reload never
// changes a request half-way. The stages live in their own modules; this file only runs them in
// order and keeps a bug in any of them from costing more than its own request.
import { type IncomingMessage, type Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { requestIdOf } from "../http/request-id.js";
import { closeAfterAnswer } from "../http/unread-body.js";
import type { AllowedDecision, LimitDecision } from "../limits/decision.js";
import { type Admission, admit } from "./admit.js";
import { type AiBodyResult, readAiBody } from "./ai-body.js";
import { BodyMemory } from "./body-memory.js";
import { alertIfRefused, budgetReporter } from "./budget-usage.js";
import { CallerShares } from "./caller-share.js";
import {
  type Admitted,
  type Clock,
  type Generation,
  type ProxyEnv,
  Refusal,
  RequestContext,
  SYSTEM_CLOCK,
  type UpgradeSocket,
} from "./context.js";
import { checkFailed, decide, observeCheck, recordDecision } from "./decide.js";
import { modelEntitlement, routeEntitlement } from "./entitlement.js";
import { forward } from "./forward.js";
import { complete, failed, refuse, roundMs, tooMany, unavailable } from "./respond.js";
import { releaseLeases } from "./response-handlers.js";
import { releaseUnforwarded } from "./settle.js";
import { startTrace } from "./trace.js";
import { isWebSocketUpgrade, serveWithoutUpgrade, watchHandshake } from "./upgrade.js";
import type { UpstreamPools } from "./upstreams.js";

/**
 * A WebSocket handshake must be decided and answered within this, or its socket is closed: Node
 * no longer applies the server's timeouts to a socket it handed to an 'upgrade' listener.
 */
const HANDSHAKE_TIMEOUT_MS = 60_000;

export interface PipelineDeps extends Omit<ProxyEnv, "clock" | "bodyMemory" | "callerShares"> {
  /** What AI bodies being read hold; default: a process-wide bound of its own. */
  bodyMemory?: BodyMemory;
  /** What callers hold of the upstreams; default: a table of its own. */
  callerShares?: CallerShares;
  /** The current generation; read once per request. */
  generation: () => Generation;
  pools: UpstreamPools;
  /** Open WebSocket tunnels (client sockets), closed by a shutdown after its grace. */
  tunnels: Set<Socket>;
  /** What the listener speaks: `https` for `listen.tls` (X-Forwarded-Proto). Default `http`. */
  scheme?: "http" | "https";
  /** Default: Date.now and performance.now. */
  clock?: Clock;
}

export function createPipeline(deps: PipelineDeps) {
  const env: ProxyEnv & PipelineDeps = Object.assign({}, deps, {
    clock: deps.clock ?? SYSTEM_CLOCK,
    bodyMemory: deps.bodyMemory ?? new BodyMemory(),
    callerShares: deps.callerShares ?? new CallerShares(),
  });
  const { logger } = env;

  /**
   * A bug or an unexpected throw must cost one request, never the process: answer 500 (or cut
   * the response if it started) and keep the in-flight count honest for shutdown.
   */
  const guarded = (ctx: RequestContext, work: () => void) => {
    try {
      work();
    } catch (err) {
      logger.error(
        { err, request_id: ctx.requestId, trace_id: ctx.trace?.traceId },
        "request handler failed",
      );
      if (!ctx.done) failed(env, ctx);
    }
  };

  function handle(req: IncomingMessage, res: ServerResponse, upgrade?: UpgradeSocket): void {
    env.inFlight.count++;
    const ctx = new RequestContext(
      env.generation(),
      req,
      res,
      requestIdOf(req.headers),
      env.clock.monotonic(),
      upgrade,
    );
    if (env.scheme === "https") ctx.scheme = "https";
    if (env.tracing) startTrace(env.tracing, ctx);
    guarded(ctx, () => {
      const admission = admit(ctx, env);
      if (admission instanceof Promise) {
        admission.then(
          (a) => guarded(ctx, () => admitted(ctx, a)),
          (err: unknown) =>
            guarded(ctx, () => {
              throw err;
            }),
        );
      } else {
        admitted(ctx, admission);
      }
    });
  }

  function admitted(ctx: RequestContext, admission: Admission): void {
    if (admission instanceof Refusal) {
      refuse(env, ctx, admission);
      return;
    }
    if (!admission.exempt) {
      const outside = routeEntitlement(admission.caller.plan, admission.route.name);
      if (outside) {
        refuse(env, admission, outside);
        return;
      }
    }
    if (admission.route.ai) readThenDecide(admission);
    else decideFor(admission);
  }

  /**
   * An AI route: the body says what the request may cost, so it is read before any limit; but
   * a refusal this instance already knows is answered first, without reading it.
   */
  function readThenDecide(ctx: Admitted): void {
    if (!ctx.exempt) {
      const known = ctx.gen.limiter.knownDenial?.(ctx.caller, ctx.route, ctx);
      if (known) {
        decided(ctx, known);
        return;
      }
    }
    const read = readAiBody(ctx, env.bodyMemory);
    if (read instanceof Promise) {
      read.then(
        (r) => guarded(ctx, () => bodyRead(ctx, r)),
        (err: unknown) =>
          guarded(ctx, () => {
            throw err;
          }),
      );
    } else {
      bodyRead(ctx, read);
    }
  }

  function bodyRead(ctx: Admitted, read: AiBodyResult): void {
    if (read === "gone") {
      // Nothing was asked of any limit: the client left while it sent its body.
      ctx.status = 499;
      complete(env, ctx);
      return;
    }
    if (read instanceof Refusal) {
      refuse(env, ctx, read);
      return;
    }
    if (!read.exempt) {
      const outside = modelEntitlement(read.caller.plan, read.ai?.request?.model);
      if (outside) {
        // The reservation was never taken: nothing to give back, nothing charged.
        refuse(env, read, outside);
        return;
      }
    }
    decideFor(read);
  }

  function decideFor(ctx: Admitted): void {
    const decision = decide(ctx, env);
    if (decision instanceof Promise) {
      const waited = ctx.trace?.storeWait();
      decision.then(
        (d) =>
          guarded(ctx, () => {
            waited?.(d);
            observeCheck(ctx, env);
            decided(ctx, d);
          }),
        (err: unknown) =>
          guarded(ctx, () => {
            waited?.(undefined);
            decided(ctx, checkFailed(ctx, env, err));
          }),
      );
    } else {
      decided(ctx, decision);
    }
  }

  function decided(ctx: Admitted, decision: LimitDecision): void {
    recordDecision(ctx, env, decision);
    ctx.trace?.decided(decision);
    switch (decision.kind) {
      case "denied":
        alertIfRefused(env, ctx, decision);
        tooMany(env, ctx, decision);
        return;
      case "degraded":
        if (decision.policy === "closed") unavailable(env, ctx, decision.reason);
        else forwardHeld(ctx, null);
        return;
      case "allowed":
        if (decision.delayMs > 0) waitForSlot(ctx, decision);
        else forwardHeld(ctx, decision);
        return;
      case "unlimited":
        forwardHeld(ctx, null);
        return;
    }
  }

  /**
   * Forwards the request holding one of its caller's `caller_share` slots on the upstream until
   * its exchange ends (caller-share.ts; complete() gives it back). Taken here, as the request is sent on, so a burst is
   * counted one by one and a request waiting on the store holds nothing. Refused: a 429, its
   * concurrency leases and AI reservation given back (its rate limits were charged: only a
   * caller holding more than its share of a short pool pays that). Exempt callers and
   * WebSocket tunnels (their own sockets, not the pool's) hold none.
   */
  function forwardHeld(ctx: Admitted, decision: AllowedDecision | null): void {
    if (ctx.exempt || ctx.upgrade) {
      forward(env, ctx, decision);
      return;
    }
    const upstream = ctx.route.upstream;
    const caller = ctx.caller;
    if (!env.callerShares.acquire(upstream.name, caller, upstream.callerShare, upstream.capacity)) {
      env.metrics.callerShareRefusals.labels(upstream.name).inc();
      if (decision?.release) releaseLeases(env, ctx, decision.release);
      if (decision) releaseUnforwarded(env, ctx, decision, budgetReporter(env, ctx, decision));
      refuse(
        env,
        ctx,
        new Refusal(
          "quota_exceeded",
          "limited",
          `This caller has ${env.callerShares.holding(upstream.name, caller)} requests in flight to this route's upstream, more than its share (${upstream.callerShare}) of the upstream's connections on this instance while they are short; retry once one of them has finished.`,
          undefined,
          1,
        ),
      );
      return;
    }
    // Given back by complete() (respond.ts), which every request reaches once.
    ctx.shareHeld = upstream.name;
    forward(env, ctx, decision);
  }

  /**
   * A leaky bucket gave the request a slot `delayMs` from now: hold it until then. A client that
   * leaves while queued is never forwarded (its slot is not given back: later requests were
   * already placed behind it).
   */
  function waitForSlot(ctx: Admitted, decision: AllowedDecision): void {
    ctx.queuedMs = decision.delayMs;
    const queuedAt = env.clock.monotonic();
    const onGone = () => {
      clearTimeout(timer);
      // The log says how long it waited, not how long it was meant to.
      ctx.queuedMs = roundMs(env.clock.monotonic() - queuedAt);
      ctx.status = 499;
      if (decision.release) releaseLeases(env, ctx, decision.release);
      // An AI request's reservation goes back: it was never forwarded.
      releaseUnforwarded(env, ctx, decision, budgetReporter(env, ctx, decision));
      complete(env, ctx);
    };
    const timer = setTimeout(() => {
      ctx.res.off("close", onGone);
      guarded(ctx, () => forwardHeld(ctx, decision));
    }, decision.delayMs);
    ctx.res.once("close", onGone);
  }

  /**
   * An `Upgrade` request. A WebSocket handshake goes through the same stages, answered on a
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
    handle(req, socketResponse(req, socket), { socket, handshake: watchHandshake(socket, head) });
  }

  /**
   * CONNECT: Node would close the socket without a word; it goes through admit, which refuses
   * it with a 405, and the socket is closed after the answer.
   */
  function handleConnect(req: IncomingMessage, socket: Socket): void {
    handle(req, socketResponse(req, socket));
  }

  return {
    handle: (req: IncomingMessage, res: ServerResponse) => handle(req, res),
    handleUpgrade,
    handleConnect,
  };
}

/**
 * A response written straight to a socket Node handed over, closed once answered. Node removed
 * its own error handler from that socket when it handed it over: without ours, a client that
 * resets the connection before the answer (ECONNRESET on a read or on the answer's write) is an
 * uncaught error, and the whole process exits. The socket is destroyed instead; its response's
 * 'close' ends the request like any client that went away. A tunnel adds its own handlers later.
 */
function socketResponse(req: IncomingMessage, socket: Socket): ServerResponse {
  socket.on("error", destroyOnError);
  const res = new ServerResponse(req);
  res.assignSocket(socket);
  res.shouldKeepAlive = false;
  res.once("finish", () => closeAfterAnswer(socket));
  return res;
}

function destroyOnError(this: Socket): void {
  this.destroy();
}
