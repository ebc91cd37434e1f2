-- Gives back what check.lua took for requests the gateway had already answered without it: the
-- reply came after the gateway gave up (the script had no deadline yet, or ran just before it
-- and its reply was late), or another slot of the same request failed. Each limit's commit is
-- undone as far as it still can be: the units go back to the window or bucket they were taken
-- from (nothing when that window has passed), a concurrency lease is released.
-- Composed after the algorithm files (see src/limits/stores/redis/scripts.ts); each limit is
-- given back by its algorithm's `refund` (lua/prelude.lua).
--
--   KEYS[i]   state key of limit i
--   ARGV[1]   now in ms (tests), or "" for the Redis clock: a token bucket whose TAT goes back to
--             it or before is full
--   ARGV[2 + 5(i-1) ..] per limit i: the time check.lua decided at (exactly as it used it: its
--             clock's "%.17g" or the test's now), algorithm code, param 1, param 2 (a calendar
--             window's: its period starts around that time, see lua/windows.lua), and the
--             units taken (the lease id for a concurrency limit)
-- Reply: how many limits had something to give back.

local current = tonumber(ARGV[1]) or redis_clock()
local given = 0
for i = 1, #KEYS do
  local base = 2 + (i - 1) * 5
  -- A refund is best effort and its reply unread: a code this script does not know gives
  -- nothing back, and the other limits still do.
  local algorithm = ALGORITHMS[tonumber(ARGV[base + 1])]
  if algorithm then
    given = given + algorithm.refund(KEYS[i], tonumber(ARGV[base]), current,
      tonumber(ARGV[base + 2]), script_param(ARGV[base + 3]), ARGV[base + 4])
  end
end
return given
