-- Debits units after the fact (the upstream's Tollgate-Cost), whatever is left: a charge may
-- drive a limit into debt that later requests wait out. Each rate algorithm's step runs with an
-- unbounded quota, so it always admits, and its commit writes the new state. A limit whose
-- algorithm holds a slot (concurrency: one slot whatever the request cost) is left as it is.
-- Composed after the algorithm files (see src/limits/stores/redis/scripts.ts); each limit is
-- debited through its algorithm's entry (lua/prelude.lua).
--
--   KEYS[i]   state key of limit i
--   ARGV[1]   now in ms, or "" to read the Redis clock
--   ARGV[2]   deadline: the Redis time (ms) past which the gateway has given up on the charge
--             (and reported it as not recorded), or "" for none; past it nothing is debited
--   ARGV[3 + 4(i-1) ..] per limit i: algorithm code, param 1, param 2 (a calendar window's: its
--             period starts around now, see lua/windows.lua), units to debit
-- Reply: the Redis time (ms, a "%.17g" string), 1 (charged) or 0 (past the deadline: nothing
-- written, nothing follows), then per limit what a zero-cost check sees afterwards:
-- remaining, reset_ms.

local reply, clock = open_reply(ARGV[2])
if reply[2] == 0 then return reply end
local now = tonumber(ARGV[1]) or clock

for i = 1, #KEYS do
  local at = 3 + (i - 1) * 4
  local algorithm = ALGORITHMS[tonumber(ARGV[at])]
  if algorithm == nil then return redis.error_reply('TOLLGATE_BAD_ALGORITHM ' .. tostring(ARGV[at])) end
  local p1, p2, cost = tonumber(ARGV[at + 1]), script_param(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local k = KEYS[i]
  if not algorithm.holds_slot then
    -- With an unbounded quota the step always admits; its commit writes the debit (a sliding
    -- log keeps only the newest p1 units: its commit trims to the limit it is given).
    local _, pending = step_over_stale(algorithm, k, now, math.huge, p2, cost)
    algorithm.commit(k, pending, now, p1, p2, cost)
  end
  local remaining, reset = limit_view(algorithm, k, now, p1, p2)
  reply[#reply + 1] = remaining
  reply[#reply + 1] = reset
end
return reply
