// The peer most Node users would reach for: http-proxy in front, rate-limiter-flexible's
// RateLimiterRedis (one Lua call per request) on the same Redis. For comparison only.
import { createServer } from "node:http";
import { Redis } from "ioredis";
import { RateLimiterRedis } from "rate-limiter-flexible";
import { listenWhenReady, proxyTo } from "./peer.mjs";

const [port, upstream, redisUrl] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const redis = new Redis(redisUrl, { enableAutoPipelining: true, enableOfflineQueue: false });
const limiter = new RateLimiterRedis({
  storeClient: redis,
  keyPrefix: "peer",
  points: 1_000_000,
  duration: 60,
});
const proxy = proxyTo(upstream);

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
listenWhenReady(server, port, redis);
