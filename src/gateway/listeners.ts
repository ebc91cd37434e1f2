// The two listeners: the proxy's HTTP server with its limits against slow and oversized clients
// and the pipeline wired to every event Node raises, the admin API's server, and the addresses
// they bind and report on the start line.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import type { Runtime } from "../config/compile.js";
import { answerClientError } from "../http/client-error.js";
import { storeAddress } from "../observability/store-errors.js";
import type { createPipeline } from "../proxy/pipeline.js";

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
  /** An idle keep-alive connection is closed after this. */
  keepAliveTimeout: 5000,
  connectionsCheckingInterval: 1000,
  /** Larger header blocks are a 431. */
  maxHeaderSize: 16 * 1024,
  // Checked in the pipeline instead, so the 400 is a problem+json like every other.
  requireHostHeader: false,
};

/** The proxy's server: every request, upgrade, 100-continue and CONNECT goes to the pipeline. */
export function createProxyServer(
  options: ProxyServerOptions,
  pipeline: ReturnType<typeof createPipeline>,
): Server {
  const proxy = createServer(options, pipeline.handle);
  proxy.on("clientError", answerClientError);
  proxy.on("upgrade", (req, socket, head) => pipeline.handleUpgrade(req, socket as Socket, head, proxy));
  // Expect: 100-continue is answered by the pipeline once the limits allow the request.
  proxy.on("checkContinue", pipeline.handle);
  proxy.on("connect", (req, socket) => pipeline.handleConnect(req, socket as Socket));
  return proxy;
}

/** The admin API's server; the handler answers every failure itself (a rejection is a bug). */
export function createAdminServer(handler: (req: IncomingMessage, res: ServerResponse) => unknown): Server {
  return createServer((req, res) => void handler(req, res));
}

/** `host:port`, `[v6]:port` or `:port` (every IPv4 interface). */
export function splitHostPort(listen: string): { host: string; port: number } {
  const colon = listen.lastIndexOf(":");
  const host = listen.slice(0, colon).replace(/^\[|\]$/g, "");
  return { host: host || "0.0.0.0", port: Number(listen.slice(colon + 1)) };
}

/** Binds `server` to a `listen` setting; rejects with the bind error (EADDRINUSE, EACCES). */
export function listen(server: Server, address: string): Promise<AddressInfo> {
  const { host, port } = splitHostPort(address);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

export function urlOf(a: AddressInfo): string {
  const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
  return `http://${host}:${a.port}`;
}

/**
 * Where this gateway sends things, for its start line: the store's address and each upstream's
 * URL, without the user and password either may carry.
 */
export function targetsOf(rt: Runtime): { store_address: string; upstreams: Record<string, string> } {
  const upstreams: Record<string, string> = {};
  for (const u of rt.upstreams.values()) upstreams[u.name] = u.origin + u.basePath;
  return { store_address: storeAddress(rt.store), upstreams };
}
