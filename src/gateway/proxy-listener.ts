// What a proxy listener is, cleartext or TLS alike, and the limits its server applies to slow and
// oversized clients: the shape listeners.ts and tls.ts both build, kept apart from either.
import type { Server as NetServer } from "node:net";
import type { ListenerTls } from "../config/listener-tls.js";
import { MAX_REQUEST_HEADER_BYTES } from "../http/request-framing.js";

export interface ProxyServerOptions {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  connectionsCheckingInterval: number;
  maxHeaderSize: number;
  requireHostHeader: boolean;
}

/**
 * Limits against slow and oversized clients. Node checks the two timeouts every
 * `connectionsCheckingInterval` (30 s by default, which would let a slowloris client hold a
 * connection for half a minute past them).
 */
export const PROXY_SERVER_OPTIONS: ProxyServerOptions = {
  /** The whole header block must arrive within this. */
  headersTimeout: 10_000,
  /** The whole request, body included, must arrive within this. */
  requestTimeout: 120_000,
  /**
   * An idle keep-alive connection (HTTP/2: a session with no stream open) is closed after this;
   * the config's `idle_timeout` sets it, and a reload changes it for connections opened after.
   */
  keepAliveTimeout: 75_000,
  connectionsCheckingInterval: 1000,
  /** Larger header blocks are a 431 (HTTP/2: its SETTINGS_MAX_HEADER_LIST_SIZE, see tls.ts). */
  maxHeaderSize: MAX_REQUEST_HEADER_BYTES,
  // Checked in the pipeline instead, so the 400 is a problem+json like every other.
  requireHostHeader: false,
};

/** What the gateway does with its proxy listener, cleartext or TLS alike. */
export interface ProxyListener {
  /** The server to bind. */
  readonly server: NetServer;
  readonly secure: boolean;
  /** Stops accepting connections. */
  close(): void;
  /**
   * Closes connections with nothing in flight; an HTTP/2 connection is told to open no more
   * streams (GOAWAY) and closes after its last one. Called again and again during a shutdown.
   */
  closeIdleConnections(): void;
  closeAllConnections(): void;
  /** How long a connection with nothing in flight is kept (connections idle now keep theirs). */
  setIdleTimeout(ms: number): void;
  /** TLS: the certificate for new connections (open ones keep theirs). */
  useCertificate?(tls: ListenerTls): void;
}
