// What the http-proxy peers share: the proxy in front of the upstream (keep-alive, a 502 when the
// upstream fails), and how a peer starts (listening once its Redis is ready, announcing it on
// stdout) and stops (cleanly on signals, so that `node --cpu-prof` can write its profile).
import { Agent } from "node:http";
import httpProxy from "http-proxy";

export function proxyTo(upstream) {
  const proxy = httpProxy.createProxyServer({
    target: upstream,
    agent: new Agent({ keepAlive: true, maxSockets: 128 }),
  });
  proxy.on("error", (_err, _req, res) => {
    if (!res.headersSent) res.writeHead(502);
    res.end();
  });
  return proxy;
}

export function listenWhenReady(server, port, redis) {
  server.keepAliveTimeout = 60_000;
  redis.once("ready", () =>
    server.listen(port, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ listening: port })}\n`)),
  );
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
}
