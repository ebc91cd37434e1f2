-- Gives back what check.lua took for requests the gateway had already answered without it: the
-- reply came after the gateway gave up (the script had no deadline yet, or ran just before it
-- and its reply was late), or another slot of the same request failed. Each limit's commit is
-- undone as far as it still can be: the units go back to the window or bucket they were taken
-- from (nothing when that window has passed), a concurrency lease is released.
-- Composed after the algorithm files (see src/limits/stores/scripts.ts).
--
--   KEYS[i]   state key of limit i
--   ARGV[1 + 5(i-1) ..] per limit i: the time check.lua decided at (exactly as it used it: its
--             clock's "%.17g" or the test's now), algorithm code, param 1, param 2, and the
--             units taken (the lease id for a concurrency limit)
-- Reply: how many limits had something to give back.

local function refund_sliding(k, at, units)
  -- The request's units are members at exactly its time; the highest numbers go, so the numbers
  -- left at that time stay 1..n, as sliding_window_commit expects.
  local score = string.format('%.17g', at)
  local members = redis.call('ZRANGEBYSCORE', k, score, score)
  if #members == 0 then return 0 end
  local numbered = {}
  for _, m in ipairs(members) do numbered[#numbered + 1] = { tonumber(string.match(m, ':(%d+)$')) or 0, m } end
  table.sort(numbered, function(a, b) return a[1] > b[1] end)
  for j = 1, math.min(units, #numbered) do redis.call('ZREM', k, numbered[j][2]) end
  return 1
end

-- Rewrites a window's string state, keeping the key's expiry.
local function rewrite(k, value)
  local ttl = redis.call('PTTL', k)
  if ttl > 0 then redis.call('SET', k, value, 'PX', ttl) end
end

local current = redis_clock()
local given = 0
for i = 1, #KEYS do
  local base = 1 + (i - 1) * 5
  local at = tonumber(ARGV[base])
  local algorithm = tonumber(ARGV[base + 1])
  local p2 = tonumber(ARGV[base + 3])
  local units_arg = ARGV[base + 4]
  local k = KEYS[i]
  if algorithm == 6 then
    given = given + redis.call('ZREM', k, units_arg)
  elseif algorithm == 3 then
    given = given + refund_sliding(k, at, tonumber(units_arg))
  else
    local units = tonumber(units_arg)
    local raw = redis.call('GET', k)
    if raw and (algorithm == 1 or algorithm == 5) then
      -- The TAT moves back by what the request advanced it; at or before now the bucket is full.
      local back = tonumber(raw) - units * p2
      if back <= current then redis.call('DEL', k) else token_bucket_commit(k, back, current) end
      given = given + 1
    elseif raw and algorithm == 2 then
      local s, c = string.match(raw, '^(%S+) (%S+)$')
      local start = math.floor(at / p2) * p2
      if tonumber(s) == start then
        rewrite(k, string.format('%.17g %d', start, math.max(0, tonumber(c) - units)))
        given = given + 1
      end
    elseif raw and algorithm == 4 then
      local s, p, c = string.match(raw, '^(%S+) (%S+) (%S+)$')
      s, p, c = tonumber(s), tonumber(p), tonumber(c)
      local start = math.floor(at / p2) * p2
      -- The units count in the window they were taken in: the current one, or the previous
      -- one once the state has moved on a window.
      if s == start then
        rewrite(k, string.format('%.17g %d %d', s, p, math.max(0, c - units)))
        given = given + 1
      elseif s == start + p2 then
        rewrite(k, string.format('%.17g %d %d', s, math.max(0, p - units), c))
        given = given + 1
      end
    end
  end
end
return given
