-- Decides every limit of one request atomically: all are evaluated first, and state is written
-- only if every limit allows the request, so a denial anywhere consumes nothing anywhere.
-- Composed after the algorithm files (see src/limits/stores/scripts.ts), never pasted into them.
--
--   KEYS[i]      state key of limit i: <prefix>{<scope>}:<limit>
--   ARGV[1]      now in ms, or "" to read the Redis clock (TIME); tests pass it explicitly
--   ARGV[2 + 4(i-1) ..] per limit i: algorithm code, param 1, param 2, cost
--     algorithm 1 = token bucket: param 1 = burst, param 2 = interval_ms
--
-- Reply: { allowed (1|0), then per limit: allowed (1|0), remaining, reset_ms, retry_after_ms }

local now = tonumber(ARGV[1])
if now == nil then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

local FIELDS = 4
local n = #KEYS
local next_state = {}
local reply = { 1 }
local all_allowed = true

for i = 1, n do
  local base = 1 + (i - 1) * FIELDS
  local algorithm = tonumber(ARGV[base + 1])
  local p1 = tonumber(ARGV[base + 2])
  local p2 = tonumber(ARGV[base + 3])
  local cost = tonumber(ARGV[base + 4])
  if algorithm ~= 1 then
    return redis.error_reply('TOLLGATE_BAD_ALGORITHM ' .. tostring(ARGV[base + 1]))
  end
  local tat = tonumber(redis.call('GET', KEYS[i]))
  local ok, nxt, remaining, reset_ms, retry_ms = token_bucket_step(tat, now, p1, p2, cost)
  next_state[i] = nxt
  if not ok then all_allowed = false end
  reply[#reply + 1] = ok and 1 or 0
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset_ms
  reply[#reply + 1] = retry_ms
end

if not all_allowed then
  reply[1] = 0
  return reply
end

for i = 1, n do
  -- TTL: until the bucket is full again, plus a second; then the key is irrelevant.
  local ttl = math.ceil(next_state[i] - now) + 1000
  redis.call('SET', KEYS[i], string.format('%.17g', next_state[i]), 'PX', ttl)
end
return reply
