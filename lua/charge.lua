-- Debits units after the fact (the upstream's Tollgate-Cost), whatever is left: a charge may
-- drive a limit into debt that later requests wait out. Each rate algorithm's step runs with an
-- unbounded quota, so it always admits, and its commit writes the new state. A concurrency
-- limit holds one slot whatever the request cost: it is left as it is.
-- Composed after the algorithm files (see src/limits/stores/scripts.ts).
--
--   KEYS[i]   state key of limit i
--   ARGV[1]   now in ms, or "" to read the Redis clock
--   ARGV[2]   deadline: the Redis time (ms) past which the gateway has given up on the charge
--             (and reported it as not recorded), or "" for none; past it nothing is debited
--   ARGV[3 + 4(i-1) ..] per limit i: algorithm code, param 1, param 2, units to debit
-- Reply: the Redis time (ms, a "%.17g" string), 1 (charged) or 0 (past the deadline: nothing
-- written, nothing follows), then per limit what a zero-cost check sees afterwards:
-- remaining, reset_ms.

local reply, clock = open_reply(ARGV[2])
if reply[2] == 0 then return reply end
local now = tonumber(ARGV[1]) or clock

for i = 1, #KEYS do
  local at = 3 + (i - 1) * 4
  local algorithm = tonumber(ARGV[at])
  local p1, p2, cost = tonumber(ARGV[at + 1]), tonumber(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local k = KEYS[i]
  if algorithm == 1 or algorithm == 5 then
    local _, nxt = token_bucket_step(tonumber(redis.call('GET', k)), now, math.huge, p2, cost)
    token_bucket_commit(k, nxt, now)
  elseif algorithm == 2 then
    local _, pending = fixed_window_step(redis.call('GET', k), now, math.huge, p2, cost)
    fixed_window_commit(k, pending)
  elseif algorithm == 3 then
    sliding_window_step(k, now, math.huge, p2, cost)
    -- At most `limit` members whatever the charge: Redis work and memory bounded by the limit.
    sliding_window_commit(k, now, p2, cost, p1)
  elseif algorithm == 4 then
    local _, pending = sliding_counter_step(redis.call('GET', k), now, math.huge, p2, cost)
    fixed_window_commit(k, pending)
  end
  local remaining, reset = limit_view(k, now, algorithm, p1, p2)
  if remaining == nil then return redis.error_reply('TOLLGATE_BAD_ALGORITHM ' .. tostring(ARGV[at])) end
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
end
return reply
