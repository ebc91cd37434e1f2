// Which `Upgrade` requests may become tunnels, and what happens to the rest.
//
// Only WebSocket is tunnelled. Any other protocol switch (h2c above all: `curl --http2` offers
// `Upgrade: h2c` with `HTTP2-Settings`) would hand the connection to the upstream, and every
// later request on it would reach the upstream unchecked. RFC 9110 §7.8 lets a server ignore
// an Upgrade it does not want, so such a request is served as the plain HTTP/1.1 request it
// also is, without the Upgrade and HTTP2-Settings fields.
//
// Node detaches a socket from its HTTP parser as soon as a request asks to upgrade and the
// server listens for 'upgrade', so the plain request is handed back by rebuilding its head
// without those fields and injecting the socket into the server again (documented for
// 'connection'). The parser then reads it, its body and anything pipelined after it exactly
// as it reads any other request.
import type { IncomingMessage, Server } from "node:http";
import type { Socket } from "node:net";
import { TLSSocket } from "node:tls";

/** A WebSocket opening handshake (RFC 6455 §4.1): GET with `Upgrade: websocket`, nothing else. */
export function isWebSocketUpgrade(req: Pick<IncomingMessage, "method" | "headers">): boolean {
  const upgrade = req.headers.upgrade;
  return req.method === "GET" && typeof upgrade === "string" && upgrade.trim().toLowerCase() === "websocket";
}

/** Fields that only make sense with the switch the gateway refuses. */
const DROPPED = new Set(["upgrade", "http2-settings"]);

/**
 * The request's head without the upgrade: Upgrade and HTTP2-Settings removed, and their tokens
 * removed from Connection (which is dropped if nothing else is left in it). Header names and
 * values come from Node's parser, which refuses CR, LF and NUL in them, so nothing can be
 * injected by writing them back.
 */
export function plainRequestHead(
  method: string,
  target: string,
  httpVersionMinor: number,
  rawHeaders: readonly string[],
): string {
  let head = `${method} ${target} HTTP/1.${httpVersionMinor}\r\n`;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    const lower = name.toLowerCase();
    if (DROPPED.has(lower)) continue;
    let value = rawHeaders[i + 1]!;
    if (lower === "connection") {
      value = value
        .split(",")
        .map((t) => t.trim())
        .filter((t) => t !== "" && !DROPPED.has(t.toLowerCase()))
        .join(", ");
      if (value === "") continue;
    }
    head += `${name}: ${value}\r\n`;
  }
  return `${head}\r\n`;
}

/** Hands a non-WebSocket upgrade request back to `server` as a plain HTTP/1.1 request. */
export function serveWithoutUpgrade(
  server: Server,
  req: IncomingMessage,
  socket: Socket,
  head: Buffer,
): void {
  const rebuilt = Buffer.from(
    plainRequestHead(req.method ?? "GET", req.url ?? "/", req.httpVersionMinor, req.rawHeaders),
    "latin1",
  );
  socket.unshift(head.length ? Buffer.concat([rebuilt, head]) : rebuilt);
  // A TLS listener's 'connection' is the raw TCP socket, which it would wrap in TLS once more;
  // its HTTP code takes a socket after the handshake, on 'secureConnection'.
  server.emit(socket instanceof TLSSocket ? "secureConnection" : "connection", socket);
}

/** Most bytes a client may send after its handshake before the answer; past it, it is cut off. */
const EARLY_BYTES_MAX = 64 * 1024;

export interface Handshake {
  /** Stops watching and returns every byte the client sent past its handshake so far. */
  release(): Buffer;
}

/**
 * Watches a WebSocket handshake's socket until it is answered. Node hands an upgrade's socket
 * over paused, so without reading it a client that goes away (a FIN: the server allows half-open
 * sockets) is never seen, and its upstream handshake, socket and concurrency slot would be held
 * until the upstream timeout. The socket is therefore read: bytes that come early are kept for
 * the tunnel (bounded), and an end of input closes the socket, which the pipeline sees as the
 * client gone.
 */
export function watchHandshake(socket: Socket, head: Buffer): Handshake {
  const early: Buffer[] = head.length ? [head] : [];
  let size = head.length;
  const onData = (chunk: Buffer) => {
    size += chunk.length;
    if (size > EARLY_BYTES_MAX) {
      socket.destroy();
      return;
    }
    early.push(chunk);
  };
  const onEnd = () => socket.destroy();
  socket.on("data", onData);
  socket.once("end", onEnd);
  return {
    release() {
      socket.off("data", onData);
      socket.off("end", onEnd);
      return early.length === 1 ? early[0]! : Buffer.concat(early);
    },
  };
}
