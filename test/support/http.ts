// Raw HTTP for tests: node:http sends the path exactly as written (fetch would normalise the
// very spellings the bypass tests need), and every response body is read in full.
import { type Agent, type IncomingHttpHeaders, request } from "node:http";

export interface Reply {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
  json<T = Record<string, unknown>>(): T;
  ms: number;
}

export interface SendOptions {
  method?: string;
  path?: string;
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  timeoutMs?: number;
  /** A keep-alive agent whose sockets are already open; default: a new connection. */
  agent?: Agent;
  /** The local address to connect from (127.0.0.2: another loopback peer than 127.0.0.1). */
  localAddress?: string;
}

export function send(base: string, options: SendOptions = {}): Promise<Reply> {
  const url = new URL(base);
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        method: options.method ?? "GET",
        path: options.path ?? "/",
        headers: options.headers,
        agent: options.agent ?? false,
        localAddress: options.localAddress,
        timeout: options.timeoutMs ?? 10_000,
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("end", () => {
          const body = Buffer.concat(chunks).toString("utf8");
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body,
            json: () => JSON.parse(body),
            ms: performance.now() - started,
          });
        });
        res.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error("test request timed out")));
    req.on("error", reject);
    req.end(options.body);
  });
}
