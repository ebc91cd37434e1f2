// HTTP/2 for tests: requests through Node's http2 client, and raw frames for what no client will
// send (connection-specific fields, floods of resets, streams and CONTINUATION frames). The raw
// side writes HPACK "literal without indexing" fields only (RFC 7541 §6.2.2), which any decoder
// must accept, and reads frames back as they arrive.
import { connect as connectHttp2, type IncomingHttpHeaders } from "node:http2";
import { connect as connectTls, type TLSSocket } from "node:tls";

export interface H2Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** One request on `session` (an http2.connect() session); rejects on a stream error. */
export function h2Request(
  session: ReturnType<typeof connectHttp2>,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<H2Reply> {
  return new Promise((resolve, reject) => {
    const stream = session.request({
      ":path": path,
      ":method": options.method ?? (options.body === undefined ? "GET" : "POST"),
      ...options.headers,
    });
    let headers: IncomingHttpHeaders = {};
    const chunks: Buffer[] = [];
    stream.on("response", (h) => {
      headers = h;
    });
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () =>
      resolve({ status: Number(headers[":status"]), headers, body: Buffer.concat(chunks).toString("utf8") }),
    );
    stream.on("error", reject);
    stream.end(options.body);
  });
}

/** A session to a TLS listener that trusts any certificate (the tests' are self-signed). */
export function h2Connect(url: string): ReturnType<typeof connectHttp2> {
  const session = connectHttp2(url, { rejectUnauthorized: false });
  session.on("error", () => {});
  return session;
}

/** The SHA-256 fingerprint of the certificate a TLS listener serves a new connection. */
export function servedFingerprint(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connectTls(
      { port, host: "127.0.0.1", rejectUnauthorized: false, servername: "localhost" },
      () => {
        const fingerprint = socket.getPeerCertificate().fingerprint256;
        socket.destroy();
        resolve(fingerprint);
      },
    );
    socket.on("error", reject);
  });
}

// --- raw frames (RFC 9113 §4, §6) ---

export const FRAME = {
  DATA: 0,
  HEADERS: 1,
  RST_STREAM: 3,
  SETTINGS: 4,
  PING: 6,
  GOAWAY: 7,
  WINDOW_UPDATE: 8,
  CONTINUATION: 9,
} as const;
export const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4 } as const;
export const ERROR = {
  NO_ERROR: 0,
  PROTOCOL_ERROR: 1,
  CANCEL: 8,
  REFUSED_STREAM: 7,
  ENHANCE_YOUR_CALM: 11,
} as const;

/** An HPACK integer with an `prefixBits`-bit prefix (RFC 7541 §5.1). */
function hpackInt(value: number, prefixBits: number): number[] {
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

function hpackString(text: string): Buffer {
  const bytes = Buffer.from(text, "latin1");
  return Buffer.concat([Buffer.from(hpackInt(bytes.length, 7)), bytes]);
}

/** A header block of literal fields without indexing, new names (no Huffman, no table). */
export function headerBlock(fields: readonly (readonly [string, string])[]): Buffer {
  return Buffer.concat(
    fields.map(([n, v]) => Buffer.concat([Buffer.from([0]), hpackString(n), hpackString(v)])),
  );
}

export function frame(
  type: number,
  flags: number,
  stream: number,
  payload: Buffer = Buffer.alloc(0),
): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

export function rstStream(stream: number, code: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(code);
  return frame(FRAME.RST_STREAM, 0, stream, payload);
}

/** The pseudo-headers of a GET for `path` to `authority`. */
export function getFields(path: string, authority = "localhost"): [string, string][] {
  return [
    [":method", "GET"],
    [":scheme", "https"],
    [":authority", authority],
    [":path", path],
  ];
}

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Buffer;
}

export interface RawH2 {
  socket: TLSSocket;
  frames: Frame[];
  /** Resolves once the server has closed the connection. */
  closed: Promise<void>;
  write(bytes: Buffer): boolean;
  /** The first frame matching `test`, waiting up to `ms` for it. */
  waitFor(test: (f: Frame) => boolean, ms?: number): Promise<Frame>;
  /** The error code of the server's GOAWAY, or undefined when it sent none. */
  goawayCode(): number | undefined;
  /** The error code of the server's RST_STREAM for `stream`, if any. */
  rstCode(stream: number): number | undefined;
  destroy(): void;
}

/**
 * A TLS connection that negotiated h2, with the preface and an empty SETTINGS sent; the
 * server's SETTINGS are acknowledged as they come.
 */
export function rawH2(port: number): Promise<RawH2> {
  return new Promise((resolve, reject) => {
    const frames: Frame[] = [];
    const waiters: { test: (f: Frame) => boolean; resolve: (f: Frame) => void }[] = [];
    const socket = connectTls(
      { port, host: "127.0.0.1", ALPNProtocols: ["h2"], rejectUnauthorized: false, servername: "localhost" },
      () => {
        if (socket.alpnProtocol !== "h2") {
          reject(new Error(`ALPN chose ${socket.alpnProtocol}`));
          return;
        }
        socket.write(
          Buffer.concat([
            Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"),
            frame(FRAME.SETTINGS, 0, 0),
          ]),
        );
        resolve(raw);
      },
    );
    const closed = new Promise<void>((r) => socket.once("close", () => r()));
    socket.on("error", () => {});
    let buffer = Buffer.alloc(0);
    socket.on("data", (data: Buffer) => {
      buffer = Buffer.concat([buffer, data]);
      while (buffer.length >= 9) {
        const length = buffer.readUIntBE(0, 3);
        if (buffer.length < 9 + length) break;
        const f: Frame = {
          type: buffer[3]!,
          flags: buffer[4]!,
          stream: buffer.readUInt32BE(5) & 0x7fffffff,
          payload: Buffer.from(buffer.subarray(9, 9 + length)),
        };
        buffer = buffer.subarray(9 + length);
        if (f.type === FRAME.SETTINGS && !(f.flags & FLAG.ACK) && socket.writable)
          socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
        frames.push(f);
        for (let i = waiters.length - 1; i >= 0; i--) {
          if (waiters[i]!.test(f)) waiters.splice(i, 1)[0]!.resolve(f);
        }
      }
    });
    const raw: RawH2 = {
      socket,
      frames,
      closed,
      write: (bytes) => (socket.writable ? socket.write(bytes) : false),
      waitFor(test, ms = 3000) {
        const found = frames.find(test);
        if (found) return Promise.resolve(found);
        return new Promise((resolveFrame, rejectFrame) => {
          const timer = setTimeout(() => rejectFrame(new Error("no such frame in time")), ms);
          waiters.push({
            test,
            resolve: (f) => {
              clearTimeout(timer);
              resolveFrame(f);
            },
          });
        });
      },
      goawayCode() {
        const goaway = frames.find((f) => f.type === FRAME.GOAWAY);
        return goaway ? goaway.payload.readUInt32BE(4) : undefined;
      },
      rstCode(stream) {
        const rst = frames.find((f) => f.type === FRAME.RST_STREAM && f.stream === stream);
        return rst ? rst.payload.readUInt32BE(0) : undefined;
      },
      destroy: () => socket.destroy(),
    };
  });
}
