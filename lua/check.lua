-- Decides the limits of a batch of requests, in order. Each request is atomic on its own: all
-- of its limits are evaluated first and its state is written only if every one allows it, so a
-- denial anywhere consumes nothing anywhere. A later request in the batch sees the writes of
-- the earlier ones, exactly as if each had been its own script call.
-- Composed after the algorithm files (see src/limits/stores/redis/scripts.ts), never pasted into
-- them; each limit is decided by its algorithm's entry in ALGORITHMS (lua/prelude.lua).
--
-- What a batch costs Redis is mostly its redis.calls (a few µs each, whatever the command) and
-- the strings it is sent, so: the string state of every key is read with one MGET and written
-- once per key at the end (prelude.lua's cache); a limit's algorithm and params are sent once per
-- batch in a table, a request's limit as an index into it; denials are recorded by the gateway
-- after the fact, from this reply (nothing of them is sent with a request that is allowed).
--
--   KEYS         per request, in request order: the state key of each of its limits
--                (<prefix>{<scope>}:<limit>)
--   ARGV[1]      number of requests in the batch
--   ARGV[2]      deadline: the Redis time (ms) past which the gateway has given up on the batch
--                and answered its requests without it, or "" for none. Past it the script
--                writes nothing at all and answers "expired".
--   ARGV[3]      number of limit specs S, then S times: algorithm code (+ 16 for a shadow
--                limit), param 1, param 2. Each algorithm's lua/ file says what its params are
--                where it registers its code (param 2 of a calendar window: its period starts
--                around now, see lua/windows.lua).
--   then per request:
--     number of limits n, or "<n>@<now ms>" to decide at that time (tests) instead of the Redis
--       clock (TIME, read once per batch)
--     per limit: the index of its spec (1-based) when its cost is 1, else "<index>|<cost>". The
--       cost is a number, or what the algorithm reads in its place: "<want>:<batch>" for a
--       batched token bucket (an instance's reservation), the lease id for a concurrency limit.
--       A cost followed by "^<need>" (a token budget under a route's max_cost) is allowed only
--       if <need> units would be, and takes only the cost.
--
-- A shadow limit is evaluated and reported like any other but never denies the request; it is
-- charged only when it would have allowed.
--
-- Reply: the Redis time the batch was decided at (ms, a "%.17g" string: the gateway learns the
-- clock from it, and gives back what a reply it no longer waited for took), then 1 (decided) or
-- 0 (past the deadline: nothing written, nothing follows), then
--        per request { allowed (1|0), then per limit: allowed (1|0), remaining, reset_ms,
--                      retry_after_ms when denied; when allowed, delay_ms (leaky bucket) or the
--                      tokens taken (batched token bucket) }, concatenated.

local SHADOW = 16

-- A step that reads its state from the batch's cache cannot meet another kind of value (MGET
-- reads one as none); only the others need step_over_stale's guard, a pcall that costs a script
-- about a µs per limit.
local function guarded_step(algorithm, k, now, p1, p2, cost_arg)
  if algorithm.cached then return algorithm.step(k, now, p1, p2, cost_arg) end
  forget_expiry(k)
  return step_over_stale(algorithm, k, now, p1, p2, cost_arg)
end

local FIELDS = 4
-- pending: per limit of the request being decided, PENDING slots: algorithm, next state,
-- param 1, param 2, cost argument, allowed, available now, reset now, shadow.
local PENDING = 9
local pending = {}
local reply, clock = open_reply(ARGV[2])
if reply[2] == 0 then return reply end

-- The batch's spec table.
local spec_algorithm, spec_shadow, spec_p1, spec_p2 = {}, {}, {}, {}
local arg = 4
for s = 1, tonumber(ARGV[3]) do
  local code = tonumber(ARGV[arg])
  spec_shadow[s] = code >= SHADOW
  if code >= SHADOW then code = code - SHADOW end
  spec_algorithm[s] = ALGORITHMS[code]
  if spec_algorithm[s] == nil then return redis.error_reply('TOLLGATE_BAD_ALGORITHM ' .. tostring(ARGV[arg])) end
  spec_p1[s], spec_p2[s] = tonumber(ARGV[arg + 1]), script_param(ARGV[arg + 2])
  arg = arg + 3
end

open_strings(KEYS)
local key = 1
local size = #reply

for _ = 1, tonumber(ARGV[1]) do
  local now = clock
  local n = tonumber(ARGV[arg])
  if n == nil then
    local at = string.find(ARGV[arg], '@', 1, true)
    n, now = tonumber(string.sub(ARGV[arg], 1, at - 1)), tonumber(string.sub(ARGV[arg], at + 1))
  end
  arg = arg + 1

  local head = size + 1
  reply[head] = 1
  size = head
  local all_allowed = true
  for i = 1, n do
    local s = tonumber(ARGV[arg])
    local cost_arg = '1'
    local need = nil
    if s == nil then
      local bar = string.find(ARGV[arg], '|', 1, true)
      s, cost_arg = tonumber(string.sub(ARGV[arg], 1, bar - 1)), string.sub(ARGV[arg], bar + 1)
      if string.find(cost_arg, '^', 1, true) then
        local take_arg
        take_arg, need = string.match(cost_arg, '^(.-)%^(%d+)$')
        cost_arg = take_arg
      end
    end
    local algorithm, is_shadow, p1, p2 = spec_algorithm[s], spec_shadow[s], spec_p1[s], spec_p2[s]
    local ok, nxt, remaining, reset_ms, fourth, available_now, reset_now
    if need then
      -- A token budget under a route's max_cost: the request must fit `need` units and takes
      -- only its cost. The step at `need` decides; the step at the cost is what commit writes.
      local need_arg = need .. string.match(cost_arg, '^%d+(.*)$')
      ok, nxt, remaining, reset_ms, fourth, available_now, reset_now =
        guarded_step(algorithm, KEYS[key + i - 1], now, p1, p2, need_arg)
      if ok then
        ok, nxt, remaining, reset_ms, fourth, available_now, reset_now =
          algorithm.step(KEYS[key + i - 1], now, p1, p2, cost_arg)
      end
    else
      ok, nxt, remaining, reset_ms, fourth, available_now, reset_now =
        guarded_step(algorithm, KEYS[key + i - 1], now, p1, p2, cost_arg)
    end
    -- Per limit, in flat arrays reused by every request of the batch (no table per limit).
    local at = (i - 1) * PENDING
    pending[at + 1], pending[at + 2], pending[at + 3], pending[at + 4] = algorithm, nxt, p1, p2
    pending[at + 5], pending[at + 6], pending[at + 7], pending[at + 8] = cost_arg, ok, available_now, reset_now
    pending[at + 9] = is_shadow
    if not ok and not is_shadow then all_allowed = false end
    reply[size + 1], reply[size + 2], reply[size + 3], reply[size + 4] = ok and 1 or 0, remaining, reset_ms, fourth
    size = size + FIELDS
    arg = arg + 1
  end

  if all_allowed then
    for i = 1, n do
      local at = (i - 1) * PENDING
      -- A shadow limit that would have denied has nothing to charge.
      if pending[at + 6] then
        pending[at + 1].commit(KEYS[key + i - 1], pending[at + 2], now, pending[at + 3], pending[at + 4], pending[at + 5])
      end
    end
  else
    -- Nothing was consumed: the limits that would have allowed report what is available now.
    reply[head] = 0
    for i = 1, n do
      local at = head + 1 + (i - 1) * FIELDS
      if reply[at] == 1 then
        reply[at + 1] = pending[(i - 1) * PENDING + 7]
        reply[at + 2] = pending[(i - 1) * PENDING + 8]
        reply[at + 3] = 0
      end
    end
  end
  key = key + n
end
flush_strings()
return reply
