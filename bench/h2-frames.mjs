// Raw HTTP/2 frames for `npm run soak`: what no HTTP/2 client will send (cancelled streams by
// the thousand, streams past the limit, endless CONTINUATION frames). Header blocks are HPACK
// literals without indexing (RFC 7541 §6.2.2), which any decoder takes; frames come back parsed.
import { connect } from "node:tls";

export const FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, CONTINUATION: 9 };
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 };
export const ENHANCE_YOUR_CALM = 11;

function hpackInt(value, prefixBits) {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [value];
  const out = [max];
  let rest = value - max;
  while (rest >= 128) {
    out.push((rest % 128) + 128);
    rest = Math.floor(rest / 128);
  }
  out.push(rest);
  return out;
}

const hpackString = (text) => {
  const bytes = Buffer.from(text, "latin1");
  return Buffer.concat([Buffer.from(hpackInt(bytes.length, 7)), bytes]);
};

export const headerBlock = (fields) =>
  Buffer.concat(fields.map(([n, v]) => Buffer.concat([Buffer.from([0]), hpackString(n), hpackString(v)])));

export function frame(type, flags, stream, payload = Buffer.alloc(0)) {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

export const request = (method, path, extra = []) => [
  [":method", method],
  [":scheme", "https"],
  [":authority", "localhost"],
  [":path", path],
  ...extra,
];

/**
 * A TLS connection that negotiated h2, preface and SETTINGS sent, the server's SETTINGS
 * acknowledged. `goaway` holds the server's GOAWAY code once one came; `closed` resolves when the
 * connection ends; `waitFor` resolves with the first frame passing a test (or null after `ms`).
 */
export function rawH2(port) {
  return new Promise((resolve, reject) => {
    const socket = connect(
      { port, host: "127.0.0.1", ALPNProtocols: ["h2"], rejectUnauthorized: false },
      () => {
        socket.write(
          Buffer.concat([
            Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"),
            frame(FRAME.SETTINGS, 0, 0),
          ]),
        );
        resolve(raw);
      },
    );
    socket.on("error", reject);
    // A handshake that never ends would hold its attacker, and the soak, for good.
    const timer = setTimeout(() => socket.destroy(new Error("no TLS handshake within 5 s")), 5000);
    socket.once("secureConnect", () => clearTimeout(timer));
    socket.once("close", () => {
      clearTimeout(timer);
      reject(new Error("closed before the handshake"));
    });
    const waiters = new Set();
    let buffer = Buffer.alloc(0);
    const raw = {
      socket,
      goaway: undefined,
      resets: 0,
      responses: [],
      closed: new Promise((r) => socket.once("close", r)),
      write: (bytes) => socket.writable && socket.write(bytes),
      waitFor(test, ms) {
        return new Promise((done) => {
          const waiter = { test, done };
          waiters.add(waiter);
          setTimeout(() => {
            if (waiters.delete(waiter)) done(null);
          }, ms);
        });
      },
    };
    socket.on("close", () => {
      for (const w of waiters) w.done(null);
      waiters.clear();
    });
    socket.on("data", (data) => {
      buffer = Buffer.concat([buffer, data]);
      while (buffer.length >= 9) {
        const length = buffer.readUIntBE(0, 3);
        if (buffer.length < 9 + length) break;
        const f = {
          type: buffer[3],
          flags: buffer[4],
          stream: buffer.readUInt32BE(5) & 0x7fffffff,
          payload: Buffer.from(buffer.subarray(9, 9 + length)),
        };
        buffer = buffer.subarray(9 + length);
        if (f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK)) raw.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
        if (f.type === FRAME.GOAWAY) raw.goaway ??= f.payload.readUInt32BE(4);
        if (f.type === FRAME.RST_STREAM) raw.resets++;
        if (f.type === FRAME.HEADERS) raw.responses.push(f.stream);
        for (const w of waiters) {
          if (w.test(f)) {
            waiters.delete(w);
            w.done(f);
          }
        }
      }
    });
  });
}
