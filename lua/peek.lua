-- Reads limits without consuming anything (the admin API): each algorithm's step runs with a
-- cost of 0 and nothing is committed. (The sliding log and the concurrency set drop entries that
-- have already expired, as any read of them would.)
-- Composed after the algorithm files (see src/limits/stores/redis/scripts.ts).
--
--   KEYS[i]   state key of limit i
--   ARGV[1]   now in ms, or "" to read the Redis clock
--   ARGV[2 + 3(i-1) ..] per limit i: algorithm code, param 1, param 2 (a calendar window's: its
--             period starts around now, see lua/windows.lua)
-- Reply: per limit, remaining and reset_ms, as a zero-cost check would see them.

local now = script_now(ARGV[1])

local reply = {}
for i = 1, #KEYS do
  local at = 2 + (i - 1) * 3
  local algorithm = ALGORITHMS[tonumber(ARGV[at])]
  if algorithm == nil then return redis.error_reply('TOLLGATE_BAD_ALGORITHM ' .. tostring(ARGV[at])) end
  local remaining, reset = limit_view(algorithm, KEYS[i], now, tonumber(ARGV[at + 1]), script_param(ARGV[at + 2]))
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
end
return reply
