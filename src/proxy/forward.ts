// The last stage of an admitted request: its headers made fit for the upstream, then a WebSocket
// handshake tunnelled or anything else streamed through the upstream's pool, ending through the
// response handlers (leases, post-charge, the log line).
import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import { forwardedBody } from "../ai/request.js";
import { outputCeiling } from "../ai/reserve.js";
import type { Runtime } from "../config/compile.js";
import { presentsCredential } from "../identity/caller.js";
import type { AllowedDecision } from "../limits/decision.js";
import { rewritePath } from "../routing/rewrite.js";
import type { Admitted, ProxyEnv } from "./context.js";
import { hasBody, upstreamRequestHeaders } from "./headers.js";
import { responseHandler } from "./response-handlers.js";
import { streamUpstream } from "./stream.js";
import { withoutForeignTraceContext, withTraceContext } from "./trace.js";
import { tunnel } from "./tunnel.js";
import type { UpstreamPools } from "./upstreams.js";

type ForwardEnv = Pick<ProxyEnv, "metrics" | "logger" | "inFlight" | "clock" | "callerShares"> & {
  pools: UpstreamPools;
  /** Open WebSocket tunnels (client sockets), closed by a shutdown after its grace. */
  tunnels: Set<Socket>;
};

/** `decision`: the limiter's, when it admitted the request (null: exempt or failing open). */
export function forward(env: ForwardEnv, ctx: Admitted, decision: AllowedDecision | null): void {
  const { req, res, route, caller } = ctx;
  const rt = ctx.gen.runtime;
  const upstream = route.upstream;
  // An AI request's body, read before its limits: sent from memory, with the ceiling its budgets
  // hold (lowered when clamped) and usage asked for.
  const ai = ctx.ai;
  const read = ai?.request;
  const body = read
    ? forwardedBody(read, decision?.output ?? outputCeiling(read, route.ai!), route.ai!)
    : undefined;
  if (ai) {
    // The upstream gets `body`; nothing else of what was read is needed any more.
    ai.request = null;
    ctx.releaseBody?.();
  }
  const built = upstreamRequestHeaders(req.rawHeaders, req.headers, {
    upstreamHost: upstream.host,
    peer: ctx.peer.text,
    scheme: ctx.scheme,
    peerTrusted: ctx.peerTrusted,
    forwardedFor: ctx.forwardedFor,
    requestId: ctx.requestId,
    keyHeader: rt.identity.header,
    hidden: route.hideCredentials ? hiddenCredentials(rt, req, ctx.credentialHeader) : undefined,
    identityEncoding: route.charge.usage !== null || route.ai !== undefined,
    bodyLength: body?.length,
    rules: route.requestHeaders,
    identity: {
      client: caller.kind === "client" ? caller.id : undefined,
      tenant: caller.kind === "client" ? caller.tenant : undefined,
      plan: caller.plan?.name,
    },
  });
  const headers = ctx.trace && !ctx.peerTrusted ? withoutForeignTraceContext(built) : built;
  // The normalised path the route was matched on, rewritten for the upstream (strip_prefix,
  // rewrite) under the upstream URL's own path; the limits keyed on the client's path already ran.
  const path =
    upstream.basePath + (route.rewrite ? rewritePath(ctx.path, route.rewrite) : ctx.path) + ctx.query;
  const upgrade = ctx.upgrade;
  if (upgrade) {
    tunnel({
      upstream,
      targets: env.pools.get(upstream),
      retries: route.retries,
      req,
      res,
      socket: upgrade.socket,
      handshake: upgrade.handshake,
      method: ctx.method,
      path,
      route,
      // A tunnel's one handshake carries the server span's context (no attempt spans).
      headers: ctx.trace ? withTraceContext(headers, ctx.trace.propagation()) : headers,
      responseHeaders: ctx.responseHeaders,
      responseRules: route.responseHeaders,
      open: env.tunnels,
      idleTimeoutMs: rt.config.tunnel_idle_timeout,
      handler: responseHandler(env, ctx, decision, true),
    });
    return;
  }
  // Admitted: now the body may come (Expect: 100-continue, see admit).
  const keepAlive = ctx.keepAliveAfterContinue;
  if (keepAlive !== undefined) {
    ctx.keepAliveAfterContinue = undefined;
    res.shouldKeepAlive = keepAlive;
    res.writeContinue();
  }
  streamUpstream({
    targets: env.pools.get(upstream),
    retries: route.retries,
    upstream,
    route,
    req,
    res,
    method: ctx.method,
    path,
    headers,
    withBody: body !== undefined || hasBody(req),
    body,
    maxBody: route.maxBody,
    responseHeaders: ctx.responseHeaders,
    responseRules: route.responseHeaders,
    errorFormat: route.ai?.format,
    handler: responseHandler(env, ctx, decision, false),
    trace: ctx.trace,
  });
}

/**
 * The headers `hide_credentials` removes: the API key header always (an unknown key let through
 * as anonymous is still a key), and Authorization when it was the credential the gateway read:
 * beside an API key header it was not read (the key wins) and is the upstream's.
 */
export function hiddenCredentials(
  rt: Runtime,
  req: Pick<IncomingMessage, "headers">,
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
