// The floor, as a peer: the least a limiter that keeps exact state in Redis must do, put in
// front of the bare passthrough (bench/bare-proxy.mjs). Per request it reads and writes the two
// keys tollgate's bench setup gives a caller (its global and its route limit, one key each, with
// an expiry, as the contract lays them out), batched the way tollgate batches: one script call
// in flight, the requests that arrive meanwhile going together in the next one (one MGET, one
// SET per key, an integer back per request). It decides nothing, sends no header and knows no
// caller but the API key. What it costs the proxy, Redis and the latency is what a limiter that
// batches this way goes no lower than on the same machine and Redis (bigger batches, a Redis with
// multi-key writes that keep expiries, or another key layout would lower it). For comparison only.
import { Redis } from "ioredis";
import { serveBareProxy } from "./bare-proxy.mjs";

const [port, upstream, redisUrl] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const KEYS_PER_REQUEST = 2;

// Each key is read, then written back: keeping its expiry when it has one (SET KEEPTTL, the
// cheaper write tollgate's script also prefers), else with one. The written value is the
// batch's own (no state is computed from what was read), the reply one 1 per request.
const READ_AND_WRITE = `
local values = redis.call('MGET', unpack(KEYS))
for i = 1, #KEYS do
  if values[i] then
    redis.call('SET', KEYS[i], ARGV[1], 'KEEPTTL')
  else
    redis.call('SET', KEYS[i], ARGV[1], 'PX', 2000)
  end
end
local reply = {}
for i = 1, #KEYS / ${KEYS_PER_REQUEST} do reply[i] = 1 end
return reply
`;

const redis = new Redis(redisUrl, { enableOfflineQueue: false });
redis.defineCommand("readAndWrite", { lua: READ_AND_WRITE });

let inFlight = false;
let waiting = [];

function flush() {
  if (inFlight || waiting.length === 0) return;
  const batch = waiting;
  waiting = [];
  inFlight = true;
  const keys = [];
  for (const w of batch) keys.push(`floor:{c:${w.caller}}:global`, `floor:{c:${w.caller}}:default`);
  redis
    .readAndWrite(keys.length, ...keys, String(Date.now()))
    .then(
      () => {
        for (const w of batch) w.resolve();
      },
      (err) => {
        for (const w of batch) w.reject(err);
      },
    )
    .finally(() => {
      inFlight = false;
      flush();
    });
}

redis.once("ready", () =>
  serveBareProxy(port, upstream, (req) => {
    const caller = req.headers["x-api-key"] ?? req.socket.remoteAddress;
    return new Promise((resolve, reject) => {
      waiting.push({ caller, resolve, reject });
      // Sent once this event-loop turn's requests are in (setImmediate, as tollgate's batcher).
      if (waiting.length === 1) setImmediate(flush);
    });
  }),
);
