// The first stage: everything decided from the request alone, before any limit is asked.
// CONNECT, framing, Expect, target, route, peer and trust, client IP, deny list, the
// auth-failure throttle, the caller, the client deny list, exemptions and max_body, in that
// order: each check only runs once the cheaper ones before it let the request through.

import { ceilSeconds } from "../http/ratelimit-headers.js";
import { framingProblem } from "../http/request-framing.js";
import {
  type Identification,
  identifyCaller,
  isBadCredential,
  presentsCredential,
} from "../identity/caller.js";
import { fieldLines, resolveClientIp } from "../identity/forwarded.js";
import { formatIp } from "../identity/ip.js";
import { ipKeyFor, socketPeer } from "../identity/peer.js";
import { normalizeTarget } from "../routing/normalize.js";
import { type Admitted, type ProxyEnv, Refusal, type RequestContext } from "./context.js";
import { forgedTrustedHeader, keyedValueProblem, methodOverrideProblem } from "./keyed-values.js";

export type Admission = Admitted | Refusal;

type AdmitEnv = Pick<ProxyEnv, "metrics" | "authFailures" | "clock" | "storedKeys">;

const EXPECT_CONTINUE = /^100-continue$/i;

const CONNECT_REFUSED = new Refusal(
  "method_not_allowed",
  "bad_request",
  "CONNECT is not served: this gateway is not a forward proxy",
  { allow: "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", connection: "close" },
);
const CLOSE = Object.freeze({ connection: "close" });
const NO_PEER = new Refusal("bad_request", "bad_request", "the connection has no usable peer address");
const DENIED = new Refusal("caller_denied", "caller_denied", "this caller is not allowed to use this API");

/**
 * Admits `ctx` or says why not. Synchronous unless the caller presents a JWT not verified
 * before. A throw (a bug) propagates to the pipeline's guard: it costs this request a 500.
 */
export function admit(ctx: RequestContext, env: AdmitEnv): Admission | Promise<Admission> {
  const { req, res } = ctx;
  const rt = ctx.gen.runtime;
  // A gateway in front of APIs is no forward proxy. Node would close the socket without a word
  // (nothing answered, logged or counted); it gets a 405 problem and the socket is closed.
  if (req.method === "CONNECT") return CONNECT_REFUSED;
  const framing = framingProblem(
    req.rawHeaders,
    req.headers,
    req.httpVersionMajor,
    req.httpVersionMinor,
    req.url,
  );
  if (framing) return new Refusal(framing.code, "bad_request", framing.detail, CLOSE);
  // The server has a checkContinue listener, so Node never answers 100 Continue by itself: the
  // body is invited only once the request is admitted and decided (forward). Until then the
  // connection is marked to close, so a refusal does not read a body the client may still
  // send; an admitted request gets its keep-alive back with the 100.
  if (req.headers.expect !== undefined && EXPECT_CONTINUE.test(req.headers.expect)) {
    ctx.keepAliveAfterContinue = res.shouldKeepAlive;
    res.shouldKeepAlive = false;
  }
  const target = normalizeTarget(req.url ?? "/");
  if (!target.ok) {
    return new Refusal("bad_path", "bad_request", `the request path cannot be used: ${target.reason}`);
  }
  ctx.path = target.path;
  ctx.pathAndQuery = target.path + target.query;
  // A single Host at most: framing refused two.
  const route = rt.routes.match(target.matchPath, ctx.method, req.headers.host);
  if (!route) return new Refusal("no_route", "no_route", `no route matches ${ctx.method} ${target.path}`);
  ctx.route = route;
  ctx.routeName = route.name;
  ctx.query = target.query;
  if (route.keyedHeaders.length > 0 || route.keyedQuery.length > 0) {
    const ambiguous = keyedValueProblem(route, req.rawHeaders, target.query);
    if (ambiguous) return new Refusal("bad_request", "bad_request", ambiguous);
  }
  const override = methodOverrideProblem(target.query);
  if (override) return new Refusal("bad_request", "bad_request", override);

  const peer = socketPeer(req.socket);
  if (!peer) return NO_PEER;
  ctx.peer = peer;
  const identity = rt.identity;
  const peerTrusted = identity.trustedProxies.size > 0 && identity.trustedProxies.contains(peer.bytes);
  if (route.trustedHeaders.length > 0 && !peerTrusted) {
    const forged = forgedTrustedHeader(route.trustedHeaders, req.rawHeaders);
    if (forged) {
      return new Refusal(
        "bad_request",
        "bad_request",
        `the ${forged} header of route "${route.name}" is set by a trusted proxy in front of the gateway, and this request came from an address that is not one (identity.trusted_proxies); send the request through that proxy`,
      );
    }
  }
  const ip = peerTrusted
    ? resolveClientIp(
        peer.bytes,
        // Forwarded is read line by line: a client's malformed line cannot reach into the line
        // its proxy appended.
        identity.clientIpHeader === "forwarded"
          ? fieldLines(req.rawHeaders, "forwarded")
          : headerText(req.headers["x-forwarded-for"]),
        identity.clientIpHeader,
        identity.trustedProxies,
      )
    : peer.bytes;
  ctx.ip = ip;
  ctx.ipKey = ipKeyFor(ip, peer, identity.ipv6Prefix);
  ctx.peerTrusted = peerTrusted;
  ctx.forwardedFor = !peerTrusted
    ? undefined
    : identity.clientIpHeader === "x-forwarded-for"
      ? headerText(req.headers["x-forwarded-for"])
      : ip === peer.bytes
        ? undefined
        : formatIp(ip);
  // A denied address is refused before its credential is read: answering 401 or 403 by the key
  // would let it tell valid keys from invalid ones.
  if (rt.deny.ips.contains(ip)) return DENIED;

  // An address that presented too many bad credentials gets only what this instance can tell
  // valid without work (identity/throttled.ts): no key lookup, no JWT signature check.
  const throttle = identity.authFailures;
  const blockedMs =
    throttle && presentsCredential(req.headers, rt)
      ? env.authFailures.blockedForMs(ctx.ipKey, throttle.limit, throttle.windowMs, env.clock.now())
      : 0;
  const identifying = identifyCaller(req.headers, ctx.ipKey, rt, env.storedKeys, blockedMs > 0);
  return identifying instanceof Promise
    ? identifying.then((identified) => withCaller(ctx, env, identified, blockedMs))
    : withCaller(ctx, env, identifying, blockedMs);
}

function withCaller(
  ctx: RequestContext,
  env: AdmitEnv,
  identified: Identification,
  blockedMs: number,
): Admission {
  const rt = ctx.gen.runtime;
  if (!identified.ok && identified.reason === "throttled") {
    env.metrics.authFailures.labels("throttled").inc();
    const retryAfter = ceilSeconds(blockedMs, 1);
    return new Refusal(
      "quota_exceeded",
      "auth_throttled",
      `More than ${rt.identity.authFailures?.limit} invalid credentials came from this address; a credential this gateway has not served before is refused for ${retryAfter} s.`,
      undefined,
      retryAfter,
    );
  }
  if (!identified.ok) {
    const throttle = rt.identity.authFailures;
    if (throttle && isBadCredential(identified.reason)) {
      env.authFailures.recordFailure(ctx.ipKey, throttle.windowMs, env.clock.now());
      env.metrics.authFailures.labels(identified.reason).inc();
    }
    // A stored key that is valid but cannot be served, or could not be checked: not the
    // client's credential's fault, so neither counted above nor a 401.
    if (identified.reason === "key_unusable")
      return new Refusal("caller_denied", "caller_denied", identified.detail);
    if (identified.reason === "key_store_unavailable")
      return new Refusal("temporary_reduced_capacity", "degraded_closed", identified.detail);
    return new Refusal("unauthorized", "unauthorized", identified.detail);
  }
  const caller = identified.caller;
  ctx.caller = caller;
  ctx.credentialHeader = identified.credentialHeader;
  if (caller.kind === "client" && rt.deny.clients.has(caller.id)) return DENIED;
  const admitted = ctx as Admitted;
  admitted.exempt =
    rt.exempt.ips.contains(admitted.ip) || (caller.kind === "client" && rt.exempt.clients.has(caller.id));

  // A body announced larger than the route takes is refused before it costs any limit.
  const maxBody = admitted.route.maxBody;
  if (maxBody !== undefined && Number(ctx.req.headers["content-length"] ?? 0) > maxBody) {
    return new Refusal(
      "body_too_large",
      "bad_request",
      `the request body is larger than ${maxBody} bytes, this route's max_body`,
      CLOSE,
    );
  }
  return admitted;
}

function headerText(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(", ") : value;
}
