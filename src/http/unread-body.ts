// A request answered before its body was read (a 401, a 429, a 404 on the admin listener): Node
// keeps such an HTTP/1.1 connection and reads the rest of the body to reach the next request,
// however much is announced, for as long as the client takes to send it. Found by an attack pass:
// four connections with a bad key made the gateway read 5 GB in 10 s (a core, and every other
// request slowed twelvefold), a thousand trickling ones held a thousand descriptors for the 120 s
// request timeout; the admin listener, with no token at all, the same. A short body is still
// read, within DRAIN_MAX_MS, and its connection reused; a longer one, or one of unknown length,
// closes the connection with the answer.
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** Most of an unread request body read after answering without it, in bytes and in time. */
export const DRAIN_MAX_BYTES = 64 * 1024;
export const DRAIN_MAX_MS = 2000;

/**
 * Before an answer given without reading the request's body: a body past DRAIN_MAX_BYTES (or
 * chunked) makes the answer close the connection (`Connection: close`, set in `headers`); a
 * shorter one is given DRAIN_MAX_MS from the answer's end to arrive.
 */
export function answeringBeforeBody(
  req: IncomingMessage,
  res: ServerResponse,
  headers: Record<string, string>,
): void {
  if (req.httpVersionMajor !== 1 || req.complete || !announcesBody(req)) return;
  if (bodyPastDrain(req)) {
    headers.connection = "close";
    res.shouldKeepAlive = false;
  } else {
    res.once("finish", () => drainWithin(req, DRAIN_MAX_MS));
  }
}

/**
 * After an answer whose headers are already written (an endpoint that may or may not read its
 * body): a body still unread past DRAIN_MAX_BYTES has the connection ended now (the answer is
 * out, so the client reads it before the FIN), a shorter one DRAIN_MAX_MS to arrive.
 */
export function answeredBeforeBody(req: IncomingMessage): void {
  if (req.httpVersionMajor !== 1 || req.complete || !announcesBody(req)) return;
  const socket = req.socket as Socket | null;
  if (!socket || socket.destroyed) return;
  if (bodyPastDrain(req)) closeAfterAnswer(socket);
  else drainWithin(req, DRAIN_MAX_MS);
}

/** How long a client may keep a socket open after its answer once the gateway ended it. */
const LINGER_MS = 2000;

/**
 * Closes a socket that has had its answer: FIN now, and a forced close if the client does not
 * close its side in time. Without it a refused WebSocket handshake (401, 404, 429, an upstream's
 * non-101), whose socket Node no longer manages, stays open for good; and a body nobody reads
 * would be read to its end.
 */
export function closeAfterAnswer(socket: Socket): void {
  if (socket.destroyed) return;
  socket.end();
  const timer = setTimeout(() => socket.destroy(), LINGER_MS);
  timer.unref();
  socket.once("close", () => clearTimeout(timer));
}

/** Whether an HTTP/1.1 request has a body at all (most refused requests are bodiless GETs). */
function announcesBody(req: IncomingMessage): boolean {
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && length !== "0");
}

/** A body announced past DRAIN_MAX_BYTES, or chunked (of a length nobody knows yet). */
function bodyPastDrain(req: IncomingMessage): boolean {
  if (req.headers["transfer-encoding"] !== undefined) return true;
  const length = Number(req.headers["content-length"] ?? 0);
  return !(length <= DRAIN_MAX_BYTES);
}

/**
 * Closes the connection if the answered request's body has not all arrived within `ms`. Only a
 * timer (no listener on the socket, which a keep-alive client could make pile up): by then the
 * socket is closed, or serving a later request of a body that did arrive.
 */
function drainWithin(req: IncomingMessage, ms: number): void {
  const socket = req.socket;
  if (req.complete || !socket || socket.destroyed) return;
  setTimeout(() => {
    if (!req.complete) socket.destroy();
  }, ms).unref();
}
