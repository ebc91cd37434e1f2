// The proxy listener with `listen.tls`: one Node Http2SecureServer whose ALPN offers h2 and
// http/1.1 (`allowHTTP1`), so a client speaking either is served by the same pipeline, under the
// same limits, as a cleartext HTTP/1.1 client.
//
// HTTP/1.1 over TLS goes through Node's HTTP/1.1 server code, which reads its timeouts and header
// limit from the server object: they are set from the same ProxyServerOptions as the cleartext
// server (Node's defaults there are 60 s for the headers, 5 min for the request and no keep-alive
// timeout at all). HTTP/2 streams reach the pipeline through the compatibility API
// (h2-compat.ts), and each session is watched by h2-sessions.ts. A new certificate (a reload)
// applies to new connections; open ones keep the one they were made with.

import { Server as HttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createSecureServer, type Http2SecureServer, type ServerHttp2Session } from "node:http2";
import type { Socket } from "node:net";
import type { Logger } from "pino";
import type { ListenerTls } from "../config/listener-tls.js";
import { answerClientError } from "../http/client-error.js";
import { MAX_REQUEST_HEADERS } from "../http/request-framing.js";
import type { createPipeline } from "../proxy/pipeline.js";
import { H2Request, H2Response } from "./h2-compat.js";
import { guardSession } from "./h2-sessions.js";
import type { ProxyListener, ProxyServerOptions } from "./proxy-listener.js";

/** HTTP/2 limits beyond the HTTP/1.1 ones they mirror (header size, timeouts). */
export const H2_SERVER_OPTIONS = {
  /**
   * Streams one connection may have open at once (SETTINGS_MAX_CONCURRENT_STREAMS). Node
   * advertises no limit by default; 100 is what Go and Envoy advertise. More are refused
   * (REFUSED_STREAM), and a client that keeps opening them past maxSessionRejectedStreams
   * loses the connection.
   */
  maxConcurrentStreams: 100,
  /** Refused streams before the session is closed (Node's default, said here). */
  maxSessionRejectedStreams: 100,
  /** Malformed frames before the session is closed (Node's default is 1000). */
  maxSessionInvalidFrames: 100,
  /**
   * Megabytes of buffered frames, header blocks and compression state one session may hold;
   * past it new streams are refused with ENHANCE_YOUR_CALM (Node's default, said here).
   */
  maxSessionMemory: 10,
  /**
   * Header fields a request may carry, pseudo-headers included, before Node resets the stream.
   * Above the gateway's own MAX_REQUEST_HEADERS (+ 4 pseudo-headers) so that a request with a
   * few fields too many gets the gateway's 431 problem, as over HTTP/1.1.
   */
  maxHeaderListPairs: MAX_REQUEST_HEADERS + 28,
} as const;

type Pipeline = ReturnType<typeof createPipeline>;

export function createTlsProxyListener(
  options: ProxyServerOptions,
  pipeline: Pipeline,
  tls: ListenerTls,
  logger: Logger,
): ProxyListener {
  const server = createSecureServer({
    cert: tls.cert,
    key: tls.key,
    // Node puts ALPN h2 then http/1.1 when allowHTTP1 is set; a client offering neither (no
    // ALPN) is served HTTP/1.1.
    allowHTTP1: true,
    // A TLS handshake must finish as soon as a request's headers must (Node's default is 2 min).
    handshakeTimeout: options.headersTimeout,
    Http2ServerRequest: H2Request,
    Http2ServerResponse: H2Response,
    maxSessionMemory: H2_SERVER_OPTIONS.maxSessionMemory,
    maxHeaderListPairs: H2_SERVER_OPTIONS.maxHeaderListPairs,
    maxSessionRejectedStreams: H2_SERVER_OPTIONS.maxSessionRejectedStreams,
    maxSessionInvalidFrames: H2_SERVER_OPTIONS.maxSessionInvalidFrames,
    settings: {
      maxConcurrentStreams: H2_SERVER_OPTIONS.maxConcurrentStreams,
      // The HTTP/1.1 limit, as HTTP/2 counts it (names and values plus 32 bytes a field). A
      // larger header block resets its stream (ENHANCE_YOUR_CALM).
      maxHeaderListSize: options.maxHeaderSize,
    },
  });
  // Read by Node's HTTP/1.1 code for connections that chose http/1.1 (see the file's header).
  const h1 = server as unknown as ProxyServerOptions;
  h1.headersTimeout = options.headersTimeout;
  h1.requestTimeout = options.requestTimeout;
  h1.keepAliveTimeout = options.keepAliveTimeout;
  h1.connectionsCheckingInterval = options.connectionsCheckingInterval;
  h1.maxHeaderSize = options.maxHeaderSize;
  h1.requireHostHeader = options.requireHostHeader;

  // One handler for both protocols: the compatibility API gives an HTTP/2 stream the shape of
  // an HTTP/1.1 request and response, which is all the pipeline reads of them (h2-compat.ts).
  const handle = pipeline.handle as unknown as (
    req: H2Request | IncomingMessage,
    res: H2Response | ServerResponse,
  ) => void;
  server.on("request", handle);
  server.on("checkContinue", handle);
  // HTTP/1.1 passes the socket; HTTP/2 a request and a response on the stream (and Node would
  // answer 405 itself only without a listener). admit refuses CONNECT either way.
  server.on("connect", (req: IncomingMessage | H2Request, second: Socket | H2Response) => {
    if (req instanceof H2Request) handle(req, second as H2Response);
    else pipeline.handleConnect(req, second as Socket);
  });
  server.on("upgrade", (req: IncomingMessage, socket: Socket, head: Buffer) =>
    pipeline.handleUpgrade(req, socket, head, server as unknown as HttpServer),
  );
  // Node sends a failed TLS handshake here too: there is nobody to answer in HTTP then.
  server.on("clientError", (err: Error & { code?: string }, socket: Socket) => {
    if (isHttpParserError(err)) answerClientError(err, socket);
    else socket.destroy();
  });

  const sessions = new Set<ServerHttp2Session>();
  const limits = { idleMs: options.keepAliveTimeout, requestTimeoutMs: options.requestTimeout };
  const watch = {
    onRapidReset(session: ServerHttp2Session, streams: number, cancelled: number) {
      logger.warn(
        { peer: session.socket?.remoteAddress, streams, cancelled },
        "HTTP/2 connection closed: its client cancels most of its streams (rapid reset)",
      );
    },
  };
  server.on("session", (session: ServerHttp2Session) => {
    sessions.add(session);
    session.once("close", () => sessions.delete(session));
    guardSession(session, limits, watch);
  });

  return {
    server,
    secure: true,
    close: () => server.close(),
    closeIdleConnections() {
      // HTTP/2: GOAWAY, so the client opens nothing more here; the session ends with its last stream.
      for (const session of sessions) if (!session.closed) session.close();
      (server as unknown as HttpServer).closeIdleConnections();
    },
    closeAllConnections() {
      for (const session of sessions) session.destroy();
      // Node's Http2SecureServer has the HTTP/1.1 server's connection list but not this method.
      HttpServer.prototype.closeAllConnections.call(server as unknown as HttpServer);
    },
    setIdleTimeout(ms) {
      h1.keepAliveTimeout = ms;
      limits.idleMs = ms;
    },
    useCertificate(next: ListenerTls) {
      // setSecureContext resets every TLS option it is not given: these two are all there are.
      (server as Http2SecureServer).setSecureContext({ cert: next.cert, key: next.key });
    },
  };
}

/** Errors of Node's HTTP/1.1 parser and its timeouts: answered in HTTP like over cleartext. */
function isHttpParserError(err: { code?: string }): boolean {
  const code = err.code ?? "";
  return code.startsWith("HPE_") || code === "ERR_HTTP_REQUEST_TIMEOUT";
}
