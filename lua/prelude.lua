-- Composed first into every script (src/limits/stores/redis/scripts.ts): the dispatch table the
-- algorithm files register in, then the clock helpers the entry scripts share.
--
-- ALGORITHMS[code] = { step, commit, refund, holds_slot, cached }, one entry per algorithm, registered by
-- its lua/ file under the code src/limits/algorithms/ gives it (below check.lua's SHADOW flag;
-- test/unit/twin-constants.test.ts holds the two sides equal). p1, p2 are the algorithm's two
-- script params, numbers except a calendar window's p2 (its period starts, a string: see
-- script_param); cost_arg is the limit's fourth ARGV as sent (a number, "<want>:<batch>" for a
-- batched token bucket, or a concurrency lease id).
--   step(key, now, p1, p2, cost_arg) -> allowed, pending (what commit writes), remaining,
--       reset_ms, fourth, available_now, reset_now_ms. The last two are what to report when
--       another limit of the request denies it; fourth is retry_after_ms when denied, and when
--       allowed 0, a leaky bucket's delay_ms or a batched take's tokens.
--   commit(key, pending, now, p1, p2, cost_arg) writes what step allowed. A post-charge is
--       the step with p1 = math.huge (it always admits) and this commit, given the real p1.
--   refund(key, at, current, p1, p2, units_arg) gives back what a check at `at` took, as far
--       as it still can; returns how many things it gave back (0 or 1).
--   holds_slot: true for an algorithm a request holds a slot of instead of being debited by
--       its cost (concurrency): a post-charge leaves it as it is.
--   cached: true for an algorithm whose state is one string it reads with read_string and
--       writes with write_string (below), so that a check's cache serves it.
-- Redis keeps no state between calls, so the table is built once per script call (a few
-- hundred ns: one small table per algorithm); a decision costs one lookup per limit and
-- allocates nothing per limit.
local ALGORITHMS = {}

-- How long a limit's state outlives the moment it stops mattering (the bucket full again, the
-- window passed, the last lease expired), in ms: the key expires on its own, never while a
-- decision could still read it.
local STATE_TTL_SLACK_MS = 1000

-- What a zero-cost check of one limit sees: remaining and reset_ms, nothing committed. Used by
-- charge.lua (the state after a post-charge) and peek.lua (the admin API's read). Every
-- algorithm's view is its own step at a cost of 0, so the read and the check cannot disagree.
local function limit_view(algorithm, k, now, p1, p2)
  return select(6, algorithm.step(k, now, p1, p2, 0))
end

-- The string state of the limits a check decides (token and leaky buckets, fixed windows,
-- sliding counters), read and written through a per-call
-- cache when the entry script opens one (check.lua: one MGET for a whole batch, one SET per key
-- at its end, however many requests of the batch it decided). A redis.call costs a script a few
-- µs whatever the command, so per request this saves a GET and, for a key several requests
-- share (a route budget), every SET but one. Without a cache (charge, peek, refund: one call
-- per limit anyway) reads and writes go straight to Redis.
--   STRINGS[key]: the value, or false for none (a missing key, or a key of another type:
--   MGET reads it as none, and the state written over it starts the limit afresh, as
--   step_over_stale does for the keys it reads itself).
local STRINGS = nil
-- key -> TTL in ms of the value to write when the script ends (flush_strings), in first-write order.
local WRITES, WRITE_ORDER = nil, nil
-- key -> true when every write of the key in this call kept its expiry (see write_string).
local KEEPS = nil
-- key -> true when an algorithm outside the cache read or wrote the key in this call: its
-- expiry is no longer the one the cache's values were written with (forget_expiry).
local TOUCHED = nil

local function read_string(key)
  if STRINGS ~= nil then
    local v = STRINGS[key]
    if v ~= nil then return v end
  end
  return redis.call('GET', key)
end

-- What the cache holds for `key` before a write: the value, false for none, nil without a cache
-- (a commit then knows nothing of the value it replaces, and sets the expiry).
local function cached_string(key)
  if STRINGS == nil then return nil end
  return STRINGS[key]
end

-- `keep`: the expiry the key already has in Redis covers the new value as well as the one it
-- replaces (the algorithm knows: a TAT in the same expiry step, lua/token_bucket.lua), so it is kept
-- (SET KEEPTTL) instead of set to `ttl_ms`. Removing an expiry and adding one back is most of
-- what a SET costs Redis, and a busy key keeps its expiry for most of its writes. A key written
-- several times in one call keeps its expiry only if every write could, the first one included
-- (that one compares with the value Redis holds: a key Redis does not hold has no expiry to keep).
local function write_string(key, value, ttl_ms, keep)
  if STRINGS == nil then
    redis.call('SET', key, value, 'PX', ttl_ms)
    return
  end
  if WRITES[key] == nil then
    WRITE_ORDER[#WRITE_ORDER + 1] = key
    KEEPS[key] = keep == true
  elseif not keep then
    KEEPS[key] = false
  end
  STRINGS[key] = value
  WRITES[key] = ttl_ms
end

-- An algorithm that keeps its state outside the cache (a sorted set) is deciding on `key`: the
-- same key as a cached limit's only when a limit changed algorithm on a reload and a batch holds
-- requests of both configs. It may delete the key (step_over_stale) or give it its own expiry,
-- so a cached value written over it must set its expiry, not keep one that may be gone.
local function forget_expiry(key)
  if TOUCHED ~= nil then TOUCHED[key] = true end
end

-- Opens the cache over `keys`, read with one MGET.
local function open_strings(keys)
  STRINGS, WRITES, WRITE_ORDER, KEEPS, TOUCHED = {}, {}, {}, {}, {}
  if #keys == 0 then return end
  local values = redis.call('MGET', unpack(keys))
  for i = 1, #keys do STRINGS[keys[i]] = values[i] end
end

-- Writes what the cache holds to write: one SET per key, keeping its expiry or with the TTL of
-- its last write (each TTL is relative to the script's own time, which does not move while it runs).
local function flush_strings()
  for i = 1, #WRITE_ORDER do
    local key = WRITE_ORDER[i]
    if KEEPS[key] and not TOUCHED[key] then
      redis.call('SET', key, STRINGS[key], 'KEEPTTL')
    else
      redis.call('SET', key, STRINGS[key], 'PX', WRITES[key])
    end
  end
end

-- An algorithm's param as sent: a number, or the text itself when it is not one (a calendar
-- window's period starts, lua/windows.lua).
local function script_param(arg)
  return tonumber(arg) or arg
end

-- The Redis clock in ms (microsecond precision).
local function redis_clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- A limit's key may hold another algorithm's kind of state (a string where a sorted set is read,
-- or the reverse): the limit's algorithm changed on a reload, or a client override replaced it
-- under the same name. Every check of it would fail with WRONGTYPE, and the route's failure
-- policy would answer every one of them (open: unlimited; the breaker opening for everyone). The
-- stale state means nothing to the new algorithm: it is deleted and the step runs again, so the
-- limit starts afresh. A step's first command on its key is the one that fails on the wrong
-- kind of value, so nothing was written before the error.
local function step_over_stale(algorithm, k, now, p1, p2, cost_arg)
  local ran, a, b, c, d, e, f, g = pcall(algorithm.step, k, now, p1, p2, cost_arg)
  if ran then return a, b, c, d, e, f, g end
  local text = type(a) == 'table' and a.err or tostring(a)
  if not string.find(text or '', 'WRONGTYPE', 1, true) then error(a) end
  redis.call('DEL', k)
  return algorithm.step(k, now, p1, p2, cost_arg)
end

-- The head of every deciding script's reply: Redis's clock (the gateway learns its offset from
-- it), then 1, or 0 when the clock is past the caller's deadline (ARGV, "" for none): the
-- gateway has answered without this script, so it must write nothing and say so.
local function open_reply(deadline_arg)
  local clock = redis_clock()
  local reply = { string.format('%.17g', clock), 1 }
  local deadline = tonumber(deadline_arg)
  if deadline ~= nil and clock > deadline then reply[2] = 0 end
  return reply, clock
end

-- The time a script decides at: ARGV's "now" in ms when a test passes one, else the Redis clock.
local function script_now(arg)
  local now = tonumber(arg)
  if now == nil then now = redis_clock() end
  return now
end
