// The two listeners: the proxy's server (cleartext HTTP/1.1 here, or TLS with HTTP/2 and
// HTTP/1.1 in tls.ts) with its limits against slow and oversized clients and the pipeline wired
// to every event Node raises, the admin API's server, and the addresses they bind and report on
// the start line.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Server as NetServer, Socket } from "node:net";
import type { Logger } from "pino";
import type { Runtime } from "../config/compile.js";
import type { ListenerTls } from "../config/listener-tls.js";
import { answerClientError } from "../http/client-error.js";
import { storeAddress } from "../observability/store-errors.js";
import type { createPipeline } from "../proxy/pipeline.js";
import type { ProxyListener, ProxyServerOptions } from "./proxy-listener.js";
import { createTlsProxyListener } from "./tls.js";

export { PROXY_SERVER_OPTIONS, type ProxyListener, type ProxyServerOptions } from "./proxy-listener.js";

/** The proxy's listener: TLS (HTTP/2 and HTTP/1.1) when `tls` is given, else cleartext HTTP/1.1. */
export function createProxyListener(
  options: ProxyServerOptions,
  pipeline: ReturnType<typeof createPipeline>,
  tls: ListenerTls | undefined,
  logger: Logger,
): ProxyListener {
  if (tls) return createTlsProxyListener(options, pipeline, tls, logger);
  const server = createProxyServer(options, pipeline);
  return {
    server,
    secure: false,
    close: () => server.close(),
    closeIdleConnections: () => server.closeIdleConnections(),
    closeAllConnections: () => server.closeAllConnections(),
    setIdleTimeout(ms) {
      server.keepAliveTimeout = ms;
    },
  };
}

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
export function listen(server: NetServer, address: string): Promise<AddressInfo> {
  const { host, port } = splitHostPort(address);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}

export function urlOf(a: Pick<AddressInfo, "address" | "family" | "port">, secure = false): string {
  const host = a.family === "IPv6" ? `[${a.address}]` : a.address;
  return `${secure ? "https" : "http"}://${host}:${a.port}`;
}

/**
 * Where this gateway sends things, for its start line: the store's address and each upstream's
 * URL, without the user and password either may carry.
 */
export function targetsOf(rt: Runtime): { store_address: string; upstreams: Record<string, string> } {
  const upstreams: Record<string, string> = {};
  for (const u of rt.upstreams.values())
    upstreams[u.name] = u.targets.map((t) => t.origin + u.basePath).join(", ");
  return { store_address: storeAddress(rt.store), upstreams };
}
