// WebSocket tunnelling (no other Upgrade is ever tunnelled: see upgrade.ts). The handshake went
// through the same pipeline as every request (route, caller, limits); here it is forwarded to
// the upstream, and once the upstream answers 101 the two sockets are joined byte for byte.
// Either side closing closes the other, a FIN included (a half-closed tunnel would otherwise
// hold its socket and its concurrency lease for good); a tunnel with no bytes either way for
// `idleTimeoutMs` is closed; the gateway's shutdown closes what is left after its grace.
import { request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import type { Socket } from "node:net";
import type { CompiledUpstream } from "../config/compile.js";
import { tlsConnectOptions } from "../config/upstream-tls.js";
import type { HeaderRules } from "../http/header-rules.js";
import { problemFor, sendProblem } from "../http/problem.js";
import { startExchangeDeadline } from "./exchange-deadline.js";
import { clientResponseHeaders, writeUpstreamHead } from "./headers.js";
import { targetFailure } from "./retry.js";
import {
  classifyUpstreamError,
  type ForwardHandler,
  type ForwardResult,
  type RouteTimeouts,
  upstreamProblem,
} from "./stream.js";
import type { Handshake } from "./upgrade.js";
import type { Target, UpstreamTargets } from "./upstreams.js";

/** After one side sends FIN, how long the other may take to finish before both are closed. */
const HALF_CLOSE_LINGER_MS = 2000;

export interface TunnelRequest {
  upstream: CompiledUpstream;
  /** The upstream's targets: the handshake goes to the one they pick. */
  targets: UpstreamTargets;
  /** Other targets tried when a connection cannot be made (never anything after it is). */
  retries: number;
  req: IncomingMessage;
  /** A response bound to the client socket, for answers that are not a 101. */
  res: ServerResponse;
  socket: Socket;
  /** The client socket's watch until the 101: gives the bytes it sent past its handshake. */
  handshake: Handshake;
  method: string;
  /** Rewritten as for any request of the route (forward.ts). */
  path: string;
  /**
   * The handshake is one exchange of the route: its timeout bounds it up to the 101 (or the
   * whole of an answer that is not one), its connect_timeout the connection. After the 101 only
   * idleTimeoutMs applies.
   */
  route: RouteTimeouts;
  /** The route's `response_headers`, applied to the upstream's. */
  responseRules?: HeaderRules | undefined;
  /** Upstream request headers (hygiene applied); Upgrade and Connection are added here. */
  headers: string[];
  responseHeaders: Record<string, string>;
  /** Open tunnels, so a shutdown can close them. */
  open: Set<Socket>;
  /** A tunnel with no bytes either way for this long is closed. */
  idleTimeoutMs: number;
  /** Its onDone is called once: when the handshake fails, or when the tunnel has closed. */
  handler: ForwardHandler;
}

/** `tried`: targets that refused the handshake's connection; `target`: the one for this attempt. */
export function tunnel(t: TunnelRequest, tried: readonly Target[] = [], target = t.targets.pick()!): void {
  if (tried.length === 0) t.targets.budget.request();
  const url = new URL(target.origin);
  let done = false;
  const finish = (result: ForwardResult) => {
    if (done) return;
    done = true;
    t.handler.onDone(result);
  };
  const headers: Record<string, string | string[]> = {};
  for (let i = 0; i < t.headers.length; i += 2) {
    const name = t.headers[i]!.toLowerCase();
    const value = t.headers[i + 1]!;
    const prior = headers[name];
    headers[name] = prior === undefined ? value : Array.isArray(prior) ? [...prior, value] : [prior, value];
  }
  headers.connection = "Upgrade";
  headers.upgrade = "websocket";
  headers.host = target.host;

  // An https target is reached over TLS with the upstream's settings (CA, client certificate,
  // SNI), exactly as its requests are: a certificate that does not verify is an error (a 502),
  // never a retry in cleartext.
  const secure = url.protocol === "https:";
  const options = {
    host: url.hostname,
    port: url.port || (secure ? 443 : 80),
    method: t.method,
    path: t.path,
    headers,
  };
  const upstreamReq = secure
    ? httpsRequest({ ...options, ...tlsConnectOptions(t.upstream.tls) })
    : httpRequest(options);
  // The status of an answer that is not a 101, once its head is relayed to the client.
  let relayed: number | undefined;
  // node:http has no connect timeout: the route's connect_timeout (0: none) is timed from here
  // to the socket's connect, the route's timeout from here to the end of the handshake.
  const deadline = startExchangeDeadline(
    { timeoutMs: t.route.timeoutMs, connectWaitMs: t.route.connectTimeoutMs || undefined },
    (err) => {
      if (relayed === undefined) {
        upstreamReq.destroy(err);
        return;
      }
      // Its head is out: only cutting the connection tells the client the body is incomplete.
      t.socket.destroy();
      upstreamReq.destroy();
      finish({ status: relayed, failure: classifyUpstreamError(err) });
    },
  );
  upstreamReq.once("socket", (socket) => {
    if (socket.connecting) socket.once("connect", () => deadline.connected());
    else deadline.connected();
  });
  upstreamReq.once("close", () => deadline.clear());
  // The client leaving during the handshake aborts it.
  const onClientGone = () => upstreamReq.destroy();
  t.socket.once("close", onClientGone);

  // Whether the connection was made: before it, a failure is the target's and the handshake may
  // go to another one (it never left the gateway).
  let connected = false;
  upstreamReq.once("socket", (socket) => {
    if (!socket.connecting) connected = true;
    else socket.once("connect", () => (connected = true));
  });
  const answered = () => {
    target.health.succeeded();
    if (tried.length > 0) t.targets.retried("success");
  };

  upstreamReq.on("upgrade", (upRes, upSocket, upHead) => {
    answered();
    deadline.clear();
    t.socket.off("close", onClientGone);
    if (t.socket.destroyed) {
      upSocket.destroy();
      finish({ status: 499, clientGone: true });
      return;
    }
    // The upstream may only switch to what was asked for: anything else is not a WebSocket
    // and would be a tunnel nobody checks.
    if (
      String(upRes.headers.upgrade ?? "")
        .trim()
        .toLowerCase() !== "websocket"
    ) {
      upSocket.destroy();
      const problem = problemFor(
        "upstream_unreachable",
        `upstream "${t.upstream.name}" switched to a protocol other than websocket`,
      );
      t.responseHeaders.connection = "close";
      sendProblem(t.res, problem, t.responseHeaders);
      finish({ status: problem.status, failure: "error" });
      return;
    }
    const out = clientResponseHeaders(upRes.headers, t.responseRules);
    for (const name in t.responseHeaders) out[name] = t.responseHeaders[name]!;
    out.connection = "Upgrade";
    out.upgrade = "websocket";
    let head = "HTTP/1.1 101 Switching Protocols\r\n";
    for (const [name, value] of Object.entries(out)) {
      for (const v of Array.isArray(value) ? value : [value]) head += `${name}: ${v}\r\n`;
    }
    t.socket.write(`${head}\r\n`);
    if (upHead.length) t.socket.write(upHead);
    const early = t.handshake.release();
    if (early.length) upSocket.write(early);

    t.open.add(t.socket);
    // Every byte either way passes through the client socket, and a socket's timer restarts
    // on reads and writes alike: one timer measures the tunnel's idleness.
    t.socket.setTimeout(t.idleTimeoutMs);
    t.socket.setNoDelay(true);
    upSocket.setNoDelay(true);
    upSocket.setTimeout(0);
    t.socket.pipe(upSocket);
    upSocket.pipe(t.socket);
    // Either side going away ends the tunnel: the other side is closed with it.
    let linger: NodeJS.Timeout | undefined;
    const close = () => {
      clearTimeout(linger);
      t.socket.destroy();
      upSocket.destroy();
      t.open.delete(t.socket);
      finish({ status: 101 });
    };
    // A FIN from either side: pipe() passes it on; the tunnel ends when the other side closes
    // too, or after a short linger if it does not.
    const halfClosed = () => {
      linger ??= setTimeout(close, HALF_CLOSE_LINGER_MS);
    };
    t.socket.once("end", halfClosed);
    upSocket.once("end", halfClosed);
    t.socket.once("timeout", close);
    t.socket.once("close", close);
    upSocket.once("close", close);
    t.socket.on("error", close);
    upSocket.on("error", close);
  });

  // The upstream refused to switch protocols: relay its answer as a normal response.
  upstreamReq.on("response", (upRes) => {
    answered();
    t.socket.off("close", onClientGone);
    t.responseHeaders.connection = "close";
    relayed = upRes.statusCode ?? 502;
    writeUpstreamHead(t.res, upRes.statusCode ?? 502, upRes.headers, t.responseHeaders, t.responseRules);
    upRes.pipe(t.res);
    upRes.on("end", () => finish({ status: upRes.statusCode ?? 502 }));
    upRes.on("error", () => {
      t.socket.destroy();
      finish({ status: upRes.statusCode ?? 502, failure: "reset" });
    });
  });

  upstreamReq.on("error", (err) => {
    t.socket.off("close", onClientGone);
    if (done) return;
    if (t.socket.destroyed) {
      // Tells nothing about the target, but ends its one request if it is on probation.
      target.health.released();
      finish({ status: 499, clientGone: true });
      return;
    }
    const why = targetFailure(err);
    if (why) target.health.failed(why);
    else target.health.released();
    if (tried.length > 0) t.targets.retried("failure");
    if (why && !connected && tried.length < t.retries) {
      const next = t.targets.pick([...tried, target]);
      if (!next) t.targets.retried("no_target");
      else if (!t.targets.budget.tryRetry()) {
        next.health.released();
        t.targets.retried("budget_exhausted");
      } else {
        tunnel(t, [...tried, target], next);
        return;
      }
    }
    const failure = classifyUpstreamError(err);
    const problem = upstreamProblem(failure, t.upstream, t.route);
    t.responseHeaders.connection = "close";
    sendProblem(t.res, problem, t.responseHeaders);
    finish({ status: problem.status, failure });
  });
  upstreamReq.end();
}
