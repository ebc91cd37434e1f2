// A real upstream for tests: records what it received and answers as each test tells it to.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface Received {
  method: string;
  url: string;
  headers: IncomingMessage["headers"];
  rawHeaders: string[];
  body: string;
}

export interface TestUpstream {
  url: string;
  port: number;
  received: Received[];
  /** Replaces the default answer (200, JSON echo of method and url). */
  handle: ((req: IncomingMessage, res: ServerResponse, body: string) => void) | null;
  close(): Promise<void>;
  server: Server;
}

/** An upstream on `host` (loopback unless a test's network namespace must reach it). */
export async function startUpstream(host = "127.0.0.1"): Promise<TestUpstream> {
  const state: TestUpstream = {
    url: "",
    port: 0,
    received: [],
    handle: null,
    close: async () => {},
    server: null as unknown as Server,
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const body = Buffer.concat(chunks).toString("utf8");
      state.received.push({
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body,
      });
      if (state.handle) return state.handle(req, res, body);
      const text = JSON.stringify({ method: req.method, url: req.url });
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
      res.end(text);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  const { port } = server.address() as AddressInfo;
  state.server = server;
  state.port = port;
  state.url = `http://${host}:${port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
