// A request and a response that record what was done to them: enough of node:http for the
// proxy's stages and the admin handler, with no socket.
import type { IncomingMessage, ServerResponse } from "node:http";
import { Writable } from "node:stream";

export interface FakeRequestInit {
  method?: string;
  url?: string;
  /** Raw header pairs, in order; `headers` is derived from them as Node would (first wins). */
  headers?: [string, string][];
  httpVersion?: "0.9" | "1.0" | "1.1";
  /** The socket peer; undefined: a socket with no address (closed before it was read). */
  remoteAddress?: string | undefined;
}

export function fakeRequest(init: FakeRequestInit = {}): IncomingMessage {
  const pairs = init.headers ?? [["Host", "gw.test"]];
  const headers: Record<string, string | string[]> = {};
  for (const [name, value] of pairs) {
    const lower = name.toLowerCase();
    if (headers[lower] === undefined) headers[lower] = value;
  }
  const [major, minor] = (init.httpVersion ?? "1.1").split(".").map(Number);
  return {
    method: init.method ?? "GET",
    url: init.url ?? "/",
    headers,
    rawHeaders: pairs.flat(),
    httpVersionMajor: major,
    httpVersionMinor: minor,
    socket: { remoteAddress: "remoteAddress" in init ? init.remoteAddress : "203.0.113.7" },
  } as unknown as IncomingMessage;
}

/** A response that records its head and body. */
export interface FakeResponse {
  statusCode: number;
  headers: Record<string, string | number>;
  body: string;
  ended: boolean;
  destroyed: boolean;
  headersSent: boolean;
  shouldKeepAlive: boolean;
  /** The events something waits for with `once`, in order (the fake never emits them). */
  awaited: string[];
  json(): Record<string, unknown>;
}

export function fakeResponse(): FakeResponse & ServerResponse {
  const res = {
    statusCode: 0,
    headers: {} as Record<string, string | number>,
    body: "",
    ended: false,
    destroyed: false,
    headersSent: false,
    shouldKeepAlive: true,
    awaited: [] as string[],
    once(event: string) {
      res.awaited.push(event);
      return res;
    },
    writeHead(status: number, headers: Record<string, string | number>) {
      res.statusCode = status;
      Object.assign(res.headers, headers);
      res.headersSent = true;
      return res;
    },
    setHeader(name: string, value: string) {
      res.headers[name.toLowerCase()] = value;
      return res;
    },
    end(body?: string) {
      res.body = body ?? "";
      res.ended = true;
      return res;
    },
    destroy() {
      res.destroyed = true;
      return res;
    },
    json() {
      return JSON.parse(res.body) as Record<string, unknown>;
    },
  };
  return res as unknown as FakeResponse & ServerResponse;
}

/** Log lines, parsed. */
export class Lines extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  override _write(chunk: Buffer, _enc: string, done: () => void): void {
    for (const line of chunk.toString("utf8").split("\n")) if (line.trim()) this.lines.push(JSON.parse(line));
    done();
  }
}
