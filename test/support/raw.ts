// Raw HTTP/1.1 over a socket, for requests node:http refuses to send (backslashes, NUL, bad
// framing): the bytes go out exactly as written, and the status line comes back.
import { connect, type Socket } from "node:net";

export interface RawReply {
  status: number;
  text: string;
}

export function rawRequest(base: string, bytes: string | Buffer, timeoutMs = 5000): Promise<RawReply> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error("raw request: no answer in time"));
    }, timeoutMs);
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString("latin1");
      const m = /^HTTP\/1\.[01] (\d{3})/.exec(text);
      resolve({ status: m ? Number(m[1]) : 0, text });
    });
    socket.write(bytes);
  });
}

/** A GET or POST for `target` that closes the connection after the answer. */
export function rawGet(base: string, target: string, method = "GET", extra = ""): Promise<RawReply> {
  return rawRequest(
    base,
    `${method} ${target} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n${extra}Content-Length: 0\r\n\r\n`,
  );
}

/**
 * Sends `head` on a new connection, then `feed` writes the body as it likes until the socket
 * closes: resolves with what came back and when the server closed it, in ms from the head. A
 * server that never closes is given up on after 10 s (closedMs then about 10,000).
 */
export function answeredEarly(
  base: string,
  head: string,
  feed: (socket: Socket) => void,
): Promise<{ text: string; closedMs: number }> {
  const url = new URL(base);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunks: Buffer[] = [];
    const started = performance.now();
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", () => {});
    socket.on("close", () =>
      resolve({ text: Buffer.concat(chunks).toString("latin1"), closedMs: performance.now() - started }),
    );
    socket.write(head);
    feed(socket);
    setTimeout(() => socket.destroy(), 10_000).unref();
  });
}

/** Writes 64 KiB chunks as fast as the socket takes them until it closes; how many bytes so far. */
export function pumpBody(socket: Socket): () => number {
  let written = 0;
  const chunk = Buffer.alloc(64 * 1024, 120);
  const pump = () => {
    while (!socket.destroyed && socket.write(chunk)) written += chunk.length;
    if (!socket.destroyed) socket.once("drain", pump);
  };
  pump();
  return () => written;
}

/** Writes one byte every `ms` until the socket closes. */
export function trickleBody(socket: Socket, ms = 100): void {
  const timer = setInterval(() => socket.write("x"), ms);
  socket.once("close", () => clearInterval(timer));
}
