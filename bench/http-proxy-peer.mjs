// The peer most Node users would reach for: http-proxy in front, rate-limiter-flexible's
// RateLimiterRedis (one Lua call per request) on the same Redis. For comparison only.
import { Agent, createServer } from "node:http";
import httpProxy from "http-proxy";
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";

const [port, upstream, redisUrl] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const redis = new Redis(redisUrl, { enableAutoPipelining: true, enableOfflineQueue: false });
const limiter = new RateLimiterRedis({
  storeClient: redis,
  keyPrefix: "peer",
  points: 1_000_000,
  duration: 60,
});
const proxy = httpProxy.createProxyServer({
  target: upstream,
  agent: new Agent({ keepAlive: true, maxSockets: 128 }),
});
proxy.on("error", (_err, _req, res) => {
  if (!res.headersSent) res.writeHead(502);
  res.end();
});

const server = createServer((req, res) => {
  const key = req.headers["x-api-key"] ?? req.socket.remoteAddress;
  limiter.consume(String(key)).then(
    (r) => {
      res.setHeader("ratelimit-remaining", String(r.remainingPoints));
      proxy.web(req, res);
    },
    (r) => {
      res.writeHead(r instanceof Error ? 503 : 429);
      res.end();
    },
  );
});
server.keepAliveTimeout = 60_000;
redis.once("ready", () =>
  server.listen(port, "127.0.0.1", () => process.stdout.write(`${JSON.stringify({ listening: port })}\n`)),
);

// Exit cleanly on signals so `node --cpu-prof` can write its profile.
for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => process.exit(0));
