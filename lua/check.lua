-- Decides the limits of a batch of requests, in order. Each request is atomic on its own: all
-- of its limits are evaluated first and its state is written only if every one allows it, so a
-- denial anywhere consumes nothing anywhere. A later request in the batch sees the writes of
-- the earlier ones, exactly as if each had been its own script call.
-- Composed after the algorithm files (see src/limits/stores/redis/scripts.ts), never pasted into
-- them; each limit is decided by its algorithm's entry in ALGORITHMS (lua/prelude.lua).
--
--   KEYS         per request, in request order: the state key of each of its limits
--                (<prefix>{<scope>}:<limit>), then the keys of its denial record: the
--                caller's denial log, and the current top-denials bucket (left out in a Redis
--                Cluster, where it lives in another slot and is counted apart)
--   ARGV[1]      number of requests in the batch
--   ARGV[2]      deadline: the Redis time (ms) past which the gateway has given up on the batch
--                and answered its requests without it, or "" for none. Past it the script
--                writes nothing at all (not even a denial record) and answers "expired".
--   then per request:
--     now in ms, or "" to read the Redis clock (TIME, read once per batch); tests pass it
--     number of limits n
--     number of denial-record keys: 0 (no record), 1 (log) or 2 (log and top bucket)
--     denial record: "" for none, else "<caller>\t<route>\t<limit 1 name>\t<limit 2 name>..."
--     per limit: algorithm code (+ 16 for a shadow limit), param 1, param 2, cost. Each
--       algorithm's lua/ file says what its params are where it registers its code (param 2
--       of a calendar window: its period starts around now, see lua/windows.lua); the cost
--       is a number, or what the algorithm reads in its place: "<want>:<batch>" for a batched
--       token bucket (an instance's reservation), the lease id for a concurrency limit. A cost
--       followed by "^<need>" (a token budget under a route's max_cost) is allowed only if
--       <need> units would be, and takes only the cost.
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
local DENIAL_LOG_MAX = 50
local DENIAL_LOG_TTL_MS = 3600000
local TOP_BUCKET_TTL_MS = 3900000

-- One denial, written by the call that decided it: the caller's capped log (newest first) and
-- its count in the current five-minute bucket of the top list.
local function record_denial(log_key, top_key, record, now, violated)
  local fields = {}
  for f in string.gmatch(record, '[^\t]+') do fields[#fields + 1] = f end
  local names = {}
  for _, i in ipairs(violated) do names[#names + 1] = fields[2 + i] end
  redis.call('LPUSH', log_key, string.format('%d', math.floor(now)) .. '\t' .. fields[2] .. '\t' .. table.concat(names, ','))
  redis.call('LTRIM', log_key, 0, DENIAL_LOG_MAX - 1)
  redis.call('PEXPIRE', log_key, DENIAL_LOG_TTL_MS)
  if top_key then
    redis.call('ZINCRBY', top_key, 1, fields[1])
    redis.call('PEXPIRE', top_key, TOP_BUCKET_TTL_MS)
  end
end

local FIELDS = 4
-- pending: per limit of the request being decided, PENDING slots: algorithm, next state,
-- param 1, param 2, cost argument, allowed, available now, reset now, shadow.
local PENDING = 9
local pending = {}
local reply, clock = open_reply(ARGV[2])
if reply[2] == 0 then return reply end
local arg = 3
local key = 1

for _ = 1, tonumber(ARGV[1]) do
  local now = tonumber(ARGV[arg])
  if now == nil then now = clock end
  local n = tonumber(ARGV[arg + 1])
  local record_keys = tonumber(ARGV[arg + 2])
  local record = ARGV[arg + 3]
  arg = arg + 4

  local head = #reply + 1
  reply[head] = 1
  local all_allowed = true
  for i = 1, n do
    local code = tonumber(ARGV[arg])
    local is_shadow = code >= SHADOW
    if is_shadow then code = code - SHADOW end
    local algorithm = ALGORITHMS[code]
    if algorithm == nil then return redis.error_reply('TOLLGATE_BAD_ALGORITHM ' .. tostring(ARGV[arg])) end
    local p1, p2, cost_arg = tonumber(ARGV[arg + 1]), script_param(ARGV[arg + 2]), ARGV[arg + 3]
    local ok, nxt, remaining, reset_ms, fourth, available_now, reset_now
    local take_arg, need = string.match(cost_arg, '^(.-)%^(%d+)$')
    if need then
      -- A token budget under a route's max_cost: the request must fit `need` units and takes
      -- only its cost. The step at `need` decides; the step at the cost is what commit writes.
      cost_arg = take_arg
      local need_arg = need .. string.match(take_arg, '^%d+(.*)$')
      ok, nxt, remaining, reset_ms, fourth, available_now, reset_now =
        step_over_stale(algorithm, KEYS[key + i - 1], now, p1, p2, need_arg)
      if ok then
        ok, nxt, remaining, reset_ms, fourth, available_now, reset_now =
          algorithm.step(KEYS[key + i - 1], now, p1, p2, cost_arg)
      end
    else
      ok, nxt, remaining, reset_ms, fourth, available_now, reset_now =
        step_over_stale(algorithm, KEYS[key + i - 1], now, p1, p2, cost_arg)
    end
    -- Per limit, in flat arrays reused by every request of the batch (no table per limit).
    local at = (i - 1) * PENDING
    pending[at + 1], pending[at + 2], pending[at + 3], pending[at + 4] = algorithm, nxt, p1, p2
    pending[at + 5], pending[at + 6], pending[at + 7], pending[at + 8] = cost_arg, ok, available_now, reset_now
    pending[at + 9] = is_shadow
    if not ok and not is_shadow then all_allowed = false end
    reply[#reply + 1] = ok and 1 or 0
    reply[#reply + 1] = remaining
    reply[#reply + 1] = reset_ms
    reply[#reply + 1] = fourth
    arg = arg + FIELDS
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
    if record_keys > 0 then
      local violated = {}
      for i = 1, n do
        if reply[head + 1 + (i - 1) * FIELDS] == 0 and not pending[(i - 1) * PENDING + 9] then
          violated[#violated + 1] = i
        end
      end
      local top_key = nil
      if record_keys > 1 then top_key = KEYS[key + n + 1] end
      record_denial(KEYS[key + n], top_key, record, now, violated)
    end
  end
  key = key + n + record_keys
end
return reply
