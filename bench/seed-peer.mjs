// The seed's design, as a peer: http-proxy in front, one token-bucket script per request on
// Redis (EVALSHA through ioredis, a hash of tokens and last refill per caller), one limit and
// one header. What tollgate's Redis cost per request is held against. For comparison only.
import { createServer } from "node:http";
import { Redis } from "ioredis";
import { listenWhenReady, proxyTo } from "./peer.mjs";

const [port, upstream, redisUrl] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const RATE_PER_MS = 1_000_000 / 1000;
const BURST = 1_000_000;

// The textbook script: read the bucket, refill it for the time passed, take one token if there
// is one, write it back with an expiry. Redis's own clock, so instances agree.
const TOKEN_BUCKET = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens, ts = tonumber(state[1]) or burst, tonumber(state[2]) or now
tokens = math.min(burst, tokens + (now - ts) * rate)
local allowed = 0
if tokens >= 1 then tokens = tokens - 1; allowed = 1 end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate) + 1000)
return { allowed, math.floor(tokens) }
`;

const redis = new Redis(redisUrl, { enableOfflineQueue: false });
redis.defineCommand("takeToken", { numberOfKeys: 1, lua: TOKEN_BUCKET });

const proxy = proxyTo(upstream);

const server = createServer((req, res) => {
  const key = `seed:${req.headers["x-api-key"] ?? req.socket.remoteAddress}`;
  redis.takeToken(key, RATE_PER_MS, BURST).then(
    ([allowed, remaining]) => {
      res.setHeader("ratelimit-remaining", String(remaining));
      if (allowed === 1) proxy.web(req, res);
      else {
        res.writeHead(429);
        res.end();
      }
    },
    () => {
      res.writeHead(503);
      res.end();
    },
  );
});
listenWhenReady(server, port, redis);
