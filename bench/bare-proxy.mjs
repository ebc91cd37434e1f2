// A bare reverse proxy on undici: no identity, no logging, the hop-by-hop headers dropped both
// ways. It streams with the same dispatch API tollgate uses. The passthrough is this alone; the
// floor peer puts one batched Redis round trip in front of it (bench/floor-peer.mjs).
import { createServer } from "node:http";
import { Pool } from "undici";

const HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "upgrade",
  "te",
  "trailer",
  "proxy-connection",
  "host",
]);

function forward(pool, req, res) {
  const headers = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) {
    if (!HOP.has(req.rawHeaders[i].toLowerCase())) headers.push(req.rawHeaders[i], req.rawHeaders[i + 1]);
  }
  let controller = null;
  res.on("close", () => {
    if (!res.writableFinished) controller?.abort(new Error("client gone"));
  });
  pool.dispatch(
    {
      path: req.url,
      method: req.method,
      headers,
      body: req.method === "GET" || req.method === "HEAD" ? null : req,
    },
    {
      onRequestStart(c) {
        controller = c;
      },
      onResponseStart(_c, status, h) {
        const out = {};
        for (const k in h) if (!HOP.has(k)) out[k] = h[k];
        res.writeHead(status, out);
      },
      onResponseData(c, chunk) {
        if (!res.write(chunk)) {
          c.pause();
          res.once("drain", () => c.resume());
        }
      },
      onResponseEnd() {
        res.end();
      },
      onResponseError(_c, err) {
        if (!res.headersSent) res.writeHead(502);
        res.end(String(err.message));
      },
    },
  );
}

/**
 * Listens on 127.0.0.1:`port` and forwards every request to `upstream`. With `admit`, each
 * request is forwarded once the promise `admit(req)` returns has resolved (a 503 if it rejects).
 */
export function serveBareProxy(port, upstream, admit) {
  const pool = new Pool(upstream, { connections: 128, pipelining: 1 });
  const server = createServer(
    admit
      ? (req, res) =>
          admit(req).then(
            () => forward(pool, req, res),
            () => {
              res.writeHead(503);
              res.end();
            },
          )
      : (req, res) => forward(pool, req, res),
  );
  server.keepAliveTimeout = 60_000;
  server.listen(port, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ listening: port })}\n`));
  // Exit cleanly on signals so `node --cpu-prof` can write its profile.
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
}
