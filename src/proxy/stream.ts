// Streams one request to its upstream and the response back, on undici's dispatch API: no
// intermediate streams, backpressure passed through (a slow client pauses the upstream read),
// and a client that goes away aborts the upstream request.
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { Readable } from "node:stream";
import type { Dispatcher } from "undici";
import type { AiFormat } from "../ai/settings.js";
import type { CompiledRoute, CompiledUpstream } from "../config/compile.js";
import type { HeaderRules } from "../http/header-rules.js";
import { type Problem, problemCode, problemFor, sendProblem } from "../http/problem.js";
import { sendProviderError } from "../http/provider-error.js";
import type { RequestTrace, UpstreamAttempt } from "../observability/tracing.js";
import { startExchangeDeadline } from "./exchange-deadline.js";
import { writeUpstreamHead } from "./headers.js";
import { mayRetry, targetFailure } from "./retry.js";
import { withTraceContext } from "./trace.js";
import type { UpstreamTargets } from "./upstreams.js";

export type UpstreamFailure = "timeout" | "connect_timeout" | "refused" | "reset" | "error";

export interface ForwardResult {
  status: number;
  failure?: UpstreamFailure;
  /** The client went away before the response was complete. */
  clientGone?: boolean;
  /**
   * Some attempt got a connection and began sending the request (undici's onRequestStart): the
   * upstream may have it. False: it never left the gateway (the client left first, or no
   * connection was made), so nothing was generated.
   */
  reached?: boolean;
}

/**
 * What happens around one forwarded response, layered the way undici layers interceptors: each
 * per-response concern (releasing leases, a post-charge, the log line) is a handler that does
 * its part and hands on to the next (response-handlers.ts).
 */
export interface ForwardHandler {
  /**
   * The upstream's response headers, before anything reaches the client; a promise holds the
   * response (upstream paused, early body chunks kept) until it settles. Post-charges use it so
   * the debit is committed before the client sees the response.
   */
  onResponseHead(headers: IncomingHttpHeaders, status?: number): Promise<unknown> | null;
  /** Each body chunk, as it arrives from the upstream (usage meters read it in passing). */
  onResponseData?(chunk: Buffer): void;
  /**
   * The upstream's response ended, with its trailers (`{}` for none), before the client's
   * response ends; a promise holds that end until it settles: a charge read from the body or
   * the trailers is then recorded before the client can send its next request.
   */
  onResponseEnd?(trailers: IncomingHttpHeaders): Promise<unknown> | null;
  /** Called once: the response is complete, it failed, or the client went away. */
  onDone(result: ForwardResult): void;
}

/** What a failure's answer names, and what bounds the exchange (exchange-deadline.ts). */
export type RouteTimeouts = Pick<CompiledRoute, "name" | "timeoutMs" | "connectTimeoutMs" | "connectWaitMs">;

export interface ForwardRequest {
  /** The upstream's targets: each attempt goes to the one they pick. */
  targets: UpstreamTargets;
  /** Attempts on other targets after a failure, for requests safe to repeat (retry.ts). */
  retries: number;
  upstream: CompiledUpstream;
  route: RouteTimeouts;
  req: IncomingMessage;
  res: ServerResponse;
  method: string;
  path: string;
  headers: string[];
  withBody: boolean;
  /** The body, read already (an AI route's): sent from memory, and again on a retry. */
  body?: Buffer | undefined;
  /** Added to the client response (rate-limit headers, request id). */
  responseHeaders: Record<string, string>;
  /** The route's `response_headers`, applied to the upstream's. */
  responseRules?: HeaderRules | undefined;
  /** An AI route's format: its failures are answered in the provider's error shape. */
  errorFormat?: AiFormat | undefined;
  /** Largest request body in bytes, counted while streaming (route max_body). */
  maxBody?: number;
  handler: ForwardHandler;
  /** The request's trace: each attempt is a span of its own, its context sent upstream. */
  trace?: RequestTrace | undefined;
}

class BodyTooLargeError extends Error {
  constructor(readonly maxBody: number) {
    super(`the request body is larger than ${maxBody} bytes`);
    this.name = "BodyTooLargeError";
  }
}

/**
 * The request body, cut off as soon as it passes `maxBody`: what Content-Length cannot promise
 * (a chunked body) is counted as it streams, and the upstream request is aborted at the limit.
 */
async function* cappedBody(req: IncomingMessage, maxBody: number, onExceeded: () => void) {
  let seen = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    seen += chunk.length;
    if (seen > maxBody) {
      onExceeded();
      throw new BodyTooLargeError(maxBody);
    }
    yield chunk;
  }
}

const TIMEOUT_CODES = new Set([
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
  "TOLLGATE_UPSTREAM_DEADLINE",
]);

export function classifyUpstreamError(err: unknown): UpstreamFailure {
  const code = (err as { code?: string }).code;
  if (code === "UND_ERR_CONNECT_TIMEOUT" || code === "TOLLGATE_CONNECT_WAIT") return "connect_timeout";
  if (code && TIMEOUT_CODES.has(code)) return "timeout";
  if (code === "ECONNREFUSED") return "refused";
  if (code === "ECONNRESET" || code === "UND_ERR_SOCKET" || code === "EPIPE") return "reset";
  return "error";
}

/** `route`: the timeouts that applied, the route's (without one: the upstream's own). */
export function upstreamProblem(
  failure: UpstreamFailure,
  upstream: CompiledUpstream,
  route?: RouteTimeouts,
): Problem {
  switch (failure) {
    case "timeout":
      return problemFor(
        "upstream_timeout",
        route
          ? `upstream "${upstream.name}" did not answer within ${route.timeoutMs} ms, the timeout of route "${route.name}"`
          : `upstream "${upstream.name}" did not answer within ${upstream.timeoutMs} ms`,
      );
    case "connect_timeout":
      return problemFor(
        "upstream_timeout",
        route
          ? `no connection to upstream "${upstream.name}" within ${route.connectTimeoutMs} ms, the connect_timeout of route "${route.name}"`
          : `upstream "${upstream.name}" did not accept a connection within ${upstream.connectTimeoutMs} ms`,
      );
    case "refused":
      return problemFor("upstream_unreachable", `upstream "${upstream.name}" refused the connection`);
    case "reset":
      return problemFor(
        "upstream_unreachable",
        `upstream "${upstream.name}" closed the connection before answering`,
      );
    default:
      return problemFor("upstream_unreachable", `upstream "${upstream.name}" could not be reached`);
  }
}

class ClientGoneError extends Error {
  constructor() {
    super("the client closed the connection");
    this.name = "ClientGoneError";
  }
}

export function streamUpstream(f: ForwardRequest): void {
  const { res } = f;
  let controller: Dispatcher.DispatchController | null = null;
  let status = 0;
  let done = false;
  const finish = (result: ForwardResult) => {
    if (done) return;
    done = true;
    deadline.clear();
    // The upstream's own status, not the 502/504 the gateway answered in its place.
    if (attemptSpan) endAttempt(status, result.failure ?? (result.clientGone ? "client_gone" : undefined));
    result.reached = everReached;
    f.handler.onDone(result);
  };
  let everReached = false;
  // The route's deadline and connect wait abort the exchange like any upstream failure. Before
  // undici has handed the request a connection there is nothing to abort yet: the client is
  // answered now, and the request is aborted, unsent, when it gets one.
  let abandoned: Error | null = null;
  const deadline = startExchangeDeadline(f.route, (err) => {
    if (controller) {
      controller.abort(err);
      return;
    }
    abandoned = err;
    fail(err);
  });
  const onClientClose = () => {
    if (res.writableFinished) return;
    controller?.abort(new ClientGoneError());
    finish({ status: status || 499, clientGone: true });
  };
  res.once("close", onClientClose);
  const resume = () => controller?.resume();
  // While onResponseHead's promise is pending: body chunks that already arrived, and whether the
  // upstream response already ended.
  let held: Buffer[] | null = null;
  let tooLarge = false;
  let endedWhileHeld: IncomingHttpHeaders | null = null;
  // A body of known length is complete for the client with its last byte, before res.end():
  // when a handler acts at the end (a charge read from the body), the chunk that completes the
  // length is kept until it has, so the client's next request already sees the charge. A
  // chunked body (every event stream) ends with its last chunk, written by res.end().
  let lengthLeft: number | undefined;
  let lastChunk: Buffer | undefined;
  const closeResponse = () => {
    if (lastChunk) res.end(lastChunk);
    else res.end();
    res.off("close", onClientClose);
    finish({ status });
  };
  const endResponse = (trailers: IncomingHttpHeaders) => {
    const hold = f.handler.onResponseEnd?.(trailers);
    if (!hold) {
      closeResponse();
      return;
    }
    void hold.finally(() => {
      // The client left, or the deadline cut the response, meanwhile: already finished.
      if (!done && !res.destroyed) closeResponse();
    });
  };

  // The attempt in flight: its target, whether it got a connection (onRequestStart), its number
  // (1: the first); and the targets tried, which a retry avoids.
  let target = f.targets.pick()!;
  let reached = false;
  let attempt = 0;
  let retriesLeft = f.retries;
  const tried = [target];
  // The attempt's span, while it is open (tracing on).
  let attemptSpan: UpstreamAttempt | undefined;
  const endAttempt = (upstreamStatus: number, failure: string | undefined) => {
    attemptSpan?.end(upstreamStatus, failure);
    attemptSpan = undefined;
  };

  const handler: Dispatcher.DispatchHandler = {
    onRequestStart(c) {
      controller = c;
      reached = true;
      everReached = true;
      deadline.connected();
      if (abandoned) c.abort(abandoned);
      else if (res.destroyed) c.abort(new ClientGoneError());
    },
    onResponseStart(c, statusCode, headers) {
      if (statusCode < 200) return; // 1xx: Node answers 100-continue to the client itself
      status = statusCode;
      // Any status is an answer: the target is up (passive health counts no 5xx).
      target.health.succeeded();
      if (attempt > 1) f.targets.retried("success");
      const writeHead = () => writeUpstreamHead(res, statusCode, headers, f.responseHeaders, f.responseRules);
      if (f.handler.onResponseEnd) lengthLeft = declaredLength(headers["content-length"]);
      const hold = f.handler.onResponseHead(headers, statusCode);
      if (!hold) {
        writeHead();
        return;
      }
      held = [];
      c.pause();
      void hold.finally(() => {
        // Failed meanwhile (the deadline, a reset): already answered.
        if (res.destroyed || done) return;
        writeHead();
        const chunks = held ?? [];
        held = null;
        for (const chunk of chunks) res.write(chunk);
        if (endedWhileHeld) endResponse(endedWhileHeld);
        else c.resume();
      });
    },
    onResponseData(c, chunk) {
      f.handler.onResponseData?.(chunk);
      if (held) {
        held.push(chunk);
        return;
      }
      if (lengthLeft !== undefined) {
        lengthLeft -= chunk.length;
        if (lengthLeft <= 0) {
          lastChunk = chunk;
          return;
        }
      }
      if (!res.write(chunk)) {
        c.pause();
        res.once("drain", resume);
      }
    },
    onResponseEnd(_c, trailers) {
      if (held) {
        endedWhileHeld = trailers ?? {};
        return;
      }
      endResponse(trailers ?? {});
    },
    onResponseError(_c, err) {
      if (!retriedElsewhere(err)) fail(err);
    },
  };

  /** The exchange failed: answered with a problem, or cut if its head is already out. */
  function fail(err: Error): void {
    if (done) return;
    if (tooLarge && !res.headersSent) {
      res.off("close", onClientClose);
      // The rest of the body is never read: close the connection after the answer.
      f.responseHeaders.connection = "close";
      answerWith(
        problemFor(
          "body_too_large",
          `the request body is larger than ${f.maxBody} bytes, this route's max_body`,
        ),
      );
      finish({ status: 413 });
      return;
    }
    if (err instanceof ClientGoneError || res.destroyed) {
      finish({ status: status || 499, clientGone: true });
      return;
    }
    const failure = classifyUpstreamError(err);
    res.off("close", onClientClose);
    if (res.headersSent) {
      // Mid-body failure: the status is already on the wire; cutting the connection is the
      // only way to tell the client the body is incomplete.
      res.destroy(err);
      finish({ status, failure });
      return;
    }
    const problem = upstreamProblem(failure, f.upstream, f.route);
    answerWith(problem);
    finish({ status: problem.status, failure });
  }

  /** A problem of the gateway's, in the provider's error shape on an AI route. */
  function answerWith(problem: Problem): void {
    if (f.errorFormat)
      sendProviderError(res, f.errorFormat, problem, problemCode(problem), f.responseHeaders);
    else sendProblem(res, problem, f.responseHeaders);
  }

  /**
   * The attempt failed: tells its target's health, and sends the request again to another
   * target when that is safe (retry.ts), the retry budget allows and one is left. False: the
   * failure is the answer.
   */
  function retriedElsewhere(err: Error): boolean {
    if (attemptSpan)
      endAttempt(status, err instanceof ClientGoneError ? "client_gone" : classifyUpstreamError(err));
    const why = done || res.destroyed || err instanceof ClientGoneError ? null : targetFailure(err);
    if (why) target.health.failed(why);
    else target.health.released();
    if (attempt > 1) f.targets.retried("failure");
    // A response head came (and went to the handlers, perhaps to the client): never again.
    if (!why || status !== 0 || tooLarge || retriesLeft === 0) return false;
    // A body held in memory can be sent again; one streamed from the client cannot.
    const bodyRead = f.body === undefined && f.withBody && (f.req.readableDidRead || f.req.destroyed);
    if (!mayRetry({ method: f.method, reached, bodyRead, err })) return false;
    const next = f.targets.pick(tried);
    if (!next) {
      f.targets.retried("no_target");
      return false;
    }
    if (!f.targets.budget.tryRetry()) {
      next.health.released();
      f.targets.retried("budget_exhausted");
      return false;
    }
    retriesLeft--;
    send(next);
    return true;
  }

  function send(next: typeof target): void {
    target = next;
    if (!tried.includes(next)) tried.push(next);
    controller = null;
    reached = false;
    attempt++;
    let headers = next.host === f.upstream.host ? f.headers : headersFor(f.headers, next);
    if (f.trace) {
      attemptSpan = f.trace.attempt(
        { host: next.host, url: next.origin + withoutQuery(f.path) },
        f.method,
        attempt - 1,
      );
      headers = withTraceContext(headers, attemptSpan);
    }
    next.dispatcher.dispatch(
      {
        path: f.path,
        method: f.method,
        headers,
        body: !f.withBody
          ? null
          : f.body !== undefined
            ? f.body
            : f.maxBody === undefined
              ? f.req
              : Readable.from(
                  cappedBody(f.req, f.maxBody, () => {
                    tooLarge = true;
                  }),
                  { objectMode: false },
                ),
        // Idle timeouts, a backstop no longer than the deadline, which bounds the whole.
        headersTimeout: f.route.timeoutMs,
        bodyTimeout: f.route.timeoutMs,
      },
      handler,
    );
  }
  // The client left while the request waited for admission (an HTTP/2 stream reset, a closed
  // socket): no upstream connection is taken for an answer nobody reads.
  if (res.destroyed) {
    target.health.released();
    res.off("close", onClientClose);
    finish({ status: 499, clientGone: true });
    return;
  }
  f.targets.budget.request();
  send(target);
}

/** A path without its query: a span's url.full never carries what a client put in the query. */
function withoutQuery(path: string): string {
  const q = path.indexOf("?");
  return q === -1 ? path : path.slice(0, q);
}

/** A response's Content-Length as a byte count; undefined when absent or not one number. */
function declaredLength(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || !/^\d{1,15}$/.test(text)) return undefined;
  const length = Number(text);
  return length > 0 ? length : undefined;
}

/** The request headers for `target`, which is not the first: its own Host. */
function headersFor(headers: string[], target: { host: string }): string[] {
  for (let i = 0; i < headers.length; i += 2) {
    if (headers[i] !== "host") continue;
    if (headers[i + 1] === target.host) return headers;
    const own = headers.slice();
    own[i + 1] = target.host;
    return own;
  }
  return headers;
}
