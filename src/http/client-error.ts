// Requests Node's parser refuses before any handler runs (malformed request lines, conflicting
// Content-Length / Transfer-Encoding, oversized headers, slow clients): answered with a
// problem+json and the connection closed, so nothing ambiguous ever reaches an upstream and the
// client still learns why.
import type { Socket } from "node:net";
import { type ProblemCode, problemFor } from "./problem.js";

interface ParserError extends Error {
  code?: string;
}

export function classifyClientError(err: ParserError): { code: ProblemCode; detail: string } {
  switch (err.code) {
    case "HPE_HEADER_OVERFLOW":
      return {
        code: "headers_too_large",
        detail: "the request headers are larger than this gateway accepts",
      };
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return { code: "request_timeout", detail: "the request was not received in time" };
    case "HPE_UNEXPECTED_CONTENT_LENGTH":
    case "HPE_INVALID_CONTENT_LENGTH":
    case "HPE_INVALID_TRANSFER_ENCODING":
    case "HPE_INVALID_CHUNK_SIZE":
      return {
        code: "bad_request",
        detail: "the request's framing is ambiguous or invalid (Content-Length / Transfer-Encoding)",
      };
    default:
      return { code: "bad_request", detail: "the request is not valid HTTP/1.1" };
  }
}

/** The server's `clientError` listener. */
export function answerClientError(err: ParserError, socket: Socket): void {
  // A reset, or a response already started, leaves no one to tell: close. (A body that breaks
  // mid-request still has an unsent response: it gets its 400.)
  const pending = (socket as { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  // Bytes after a request that asked to close (Connection: close, or HTTP/1.0): that request is
  // being answered, and its answer closes the connection. A 400 now would replace the answer to
  // a request the upstream may already have executed, and a client retrying it would run it twice.
  if (err.code === "HPE_CLOSED_CONNECTION" && pending !== undefined) return;
  if (err.code === "ECONNRESET" || !socket.writable || pending?.headersSent) {
    socket.destroy();
    return;
  }
  const { code, detail } = classifyClientError(err);
  const problem = problemFor(code, detail);
  const body = JSON.stringify(problem);
  socket.end(
    `HTTP/1.1 ${problem.status} ${problem.title}\r\n` +
      "Content-Type: application/problem+json\r\n" +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      "Cache-Control: no-store\r\n" +
      "Connection: close\r\n\r\n" +
      body,
  );
  socket.destroySoon?.();
}
