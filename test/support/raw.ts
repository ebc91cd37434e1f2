// Raw HTTP/1.1 over a socket, for requests node:http refuses to send (backslashes, NUL, bad
// framing): the bytes go out exactly as written, and the status line comes back.
import { connect } from "node:net";

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
