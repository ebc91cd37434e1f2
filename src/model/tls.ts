// TLS as the compiled model holds it: the listener's certificate and an upstream's trust, read
// and checked by the loader (config/listener-tls.ts, config/upstream-tls.ts).

/**
 * What connections to an upstream's https targets are made with: plain data (a load on another
 * thread sends it back), given as is to undici's Pool and to node:https (WebSocket handshakes).
 */
export interface UpstreamTls {
  /** PEM CA certificates replacing the system's; undefined: the system's. */
  ca?: string;
  /** PEM client certificate and its key (mTLS). */
  cert?: string;
  key?: string;
  /** SNI and the name the certificate must carry; undefined: the target's host. */
  servername?: string;
  /** false only with `insecure: true`. */
  rejectUnauthorized: boolean;
  /** SHA-256 of the files' contents: a changed CA or certificate is a changed pool. */
  hash: string;
}

/** What the listener serves: plain data, so a load on another thread can send it back. */
export interface ListenerTls {
  /** The files, resolved: watched with the config. */
  certFile: string;
  keyFile: string;
  /** The PEM texts as read; the server's secure context is built from these, never re-read. */
  cert: string;
  key: string;
  /** SHA-256 fingerprint of the server's certificate (the file's first), for the logs. */
  fingerprint: string;
  /** When the server's certificate expires (ISO 8601). */
  notAfter: string;
}
