// What one HTTP/2 connection may cost. nghttp2 and Node bound most of it through the server's
// options (H2_SERVER_OPTIONS: concurrent streams, header list size and pairs, session memory,
// invalid frames, refused streams; and since nghttp2 1.57 a token bucket on stream resets, 1000
// then 33/s, and since 1.61 at most 8 CONTINUATION frames per header block). What is left is
// watched here, per session:
//
// - rapid reset (CVE-2023-44487): a client that opens streams and cancels them at once costs a
//   request each (admitted, limited, maybe forwarded) and nothing it has to wait for. nghttp2's
//   bucket lets a thousand through per connection; a session whose client cancelled more than
//   half of its streams, and at least PREMATURE_RESETS of them, is closed with ENHANCE_YOUR_CALM
//   (Envoy's rule);
// - idle sessions: Node's session timeout counts any frame as activity, PING and SETTINGS
//   included, so a client could hold a connection for free. A session with no stream open for
//   `idleMs` is closed (GOAWAY, then the socket once nothing is in flight), as an idle HTTP/1.1
//   keep-alive connection is;
// - slow requests: a request body must have arrived within `requestTimeoutMs`, as HTTP/1.1's
//   requestTimeout asks of a whole request; a later one has its stream cancelled.
import { constants, type ServerHttp2Session, type ServerHttp2Stream } from "node:http2";

/** Cancelled streams that close a session once they are more than half of its streams. */
export const PREMATURE_RESETS = 100;

export interface SessionLimits {
  /** A session with no stream open for this long is closed. */
  idleMs: number;
  /** A request's body must be complete within this. */
  requestTimeoutMs: number;
}

export interface SessionWatch {
  /** A session closed for cancelling too many streams (logged by the caller). */
  onRapidReset(session: ServerHttp2Session, streams: number, cancelled: number): void;
}

/** Watches `session` until it closes; see the header of this file. */
export function guardSession(session: ServerHttp2Session, limits: SessionLimits, watch: SessionWatch): void {
  let open = 0;
  let streams = 0;
  let cancelled = 0;
  const idle = setTimeout(() => {
    if (open === 0 && !session.closed && !session.destroyed) session.close();
  }, limits.idleMs);
  idle.unref();
  let ended = false;
  session.once("close", () => {
    ended = true;
    clearTimeout(idle);
  });

  session.on("stream", (stream: ServerHttp2Stream) => {
    open++;
    streams++;
    let ours = false;
    // A request whose HEADERS ended its stream is already complete.
    const deadline = stream.endAfterHeaders
      ? undefined
      : setTimeout(() => {
          ours = true;
          stream.close(constants.NGHTTP2_CANCEL);
        }, limits.requestTimeoutMs);
    deadline?.unref();
    if (deadline) stream.once("end", () => clearTimeout(deadline));
    // 'aborted': the stream closed before the response was complete.
    stream.once("aborted", () => {
      // A closing session (told to go away, idle, shutting down) is judged no more.
      if (ours || session.closed || session.destroyed) return;
      cancelled++;
      if (cancelled >= PREMATURE_RESETS && cancelled * 2 > streams) {
        watch.onRapidReset(session, streams, cancelled);
        abandon(session);
      }
    });
    stream.once("close", () => {
      clearTimeout(deadline);
      // Refreshing a cleared timer starts it again, and it would hold the session until it fires.
      if (--open === 0 && !ended) idle.refresh();
    });
  });
}

/** How long a session told to go away may take to finish the streams it has. */
const GOAWAY_GRACE_MS = 1000;

/**
 * GOAWAY with ENHANCE_YOUR_CALM: no stream after the last one seen is accepted, and the socket
 * closes once the streams in flight end. Destroying the session at once would often lose the
 * GOAWAY (the client would not learn why); a client that keeps its streams open past the grace
 * loses them.
 */
function abandon(session: ServerHttp2Session): void {
  session.goaway(constants.NGHTTP2_ENHANCE_YOUR_CALM);
  session.close();
  setTimeout(() => session.destroy(), GOAWAY_GRACE_MS).unref();
}
