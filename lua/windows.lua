-- Window algorithms; the same arithmetic as src/limits/algorithms/windows.ts, operation for
-- operation. Registered as codes 2 (fixed window), 3 (sliding window log) and 4 (sliding window
-- counter); params: limit, window_ms. Their functions have the entry shapes of lua/prelude.lua.
-- A calendar fixed window (`window: 1 month`) gives, in place of window_ms, the starts of four
-- consecutive periods in ms, space-separated ("<s1> <s2> <s3> <s4>"): Lua has no time zone
-- rules, so the gateway computes them around its estimate of the script's clock, and the step
-- counts in the pair [s(i), s(i+1)) that holds its own now.

-- The fixed window holding `now`: [start, finish). A window that is a number is aligned on its
-- multiples since the epoch; a list of period starts that does not reach `now` (the gateway's
-- clock a whole period away from Redis's) fails the script rather than count in a wrong period.
local function fixed_window_bounds(now, window)
  if type(window) == 'number' then
    local start = math.floor(now / window) * window
    return start, start + window
  end
  local prev = nil
  for text in string.gmatch(window, '%S+') do
    local s = tonumber(text)
    if prev ~= nil and prev <= now and now < s then return prev, s end
    prev = s
  end
  error(redis.error_reply('TOLLGATE_CALENDAR_RANGE ' .. string.format('%.17g', now) .. ' is outside the periods ' .. window))
end

-- Fixed window. State: one string "<window start ms> <count>"; pending: the string to write.
local function fixed_window_step(key, now, limit, window, cost_arg)
  local cost = tonumber(cost_arg)
  local raw = read_string(key)
  local start, finish = fixed_window_bounds(now, window)
  local used = 0
  if raw then
    local s, c = string.match(raw, '^(%S+) (%S+)$')
    if tonumber(s) == start then used = tonumber(c) end
  end
  local reset = math.ceil(finish - now)
  local avail = limit - used
  if avail < 0 then avail = 0 end
  if used + cost > limit then
    return false, nil, avail, reset, reset, avail, reset
  end
  return true, string.format('%.17g %d', start, used + cost), limit - used - cost, reset, 0, avail, reset
end

-- The key lives until the window ends (the step's reset_ms), plus the slack.
local function fixed_window_commit(key, value, now, _, window)
  local _, finish = fixed_window_bounds(now, window)
  write_string(key, value, math.ceil(finish - now) + STATE_TTL_SLACK_MS)
end

-- Rewrites a window's string state, keeping the key's expiry (a refund).
local function rewrite_window(key, value)
  local ttl = redis.call('PTTL', key)
  if ttl > 0 then redis.call('SET', key, value, 'PX', ttl) end
end

-- The units go back to the window they were taken in, if it is still the current one.
local function fixed_window_refund(key, at, _, _, window, units_arg)
  local units = tonumber(units_arg)
  local raw = redis.call('GET', key)
  if not raw then return 0 end
  local s, c = string.match(raw, '^(%S+) (%S+)$')
  local start = fixed_window_bounds(at, window)
  if tonumber(s) ~= start then return 0 end
  rewrite_window(key, string.format('%.17g %d', start, math.max(0, tonumber(c) - units)))
  return 1
end

-- Sliding window log. State: a sorted set, one member per admitted unit, scored by its time;
-- a unit admitted at t counts while now < t + window. Only the newest `limit` units can ever
-- decide anything (older ones leave the window first, and `limit` units already deny), so a
-- post-charge past the limit keeps just those: at most `limit` members, whatever was charged.
-- pending: the units the window held before this request.
local function sliding_window_step(key, now, limit, window, cost_arg)
  local cost = tonumber(cost_arg)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.17g', now - window))
  local used = redis.call('ZCARD', key)
  local full_again = 0
  if used > 0 then
    local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    full_again = math.ceil(tonumber(newest[2]) + window - now)
  end
  local avail = limit - used
  if avail < 0 then avail = 0 end
  if used + cost > limit then
    local retry
    if cost > limit then
      retry = math.ceil(window)
    else
      local must_leave = used + cost - limit
      local oldest = redis.call('ZRANGE', key, must_leave - 1, must_leave - 1, 'WITHSCORES')
      retry = math.ceil(tonumber(oldest[2]) + window - now)
    end
    return false, nil, avail, full_again, retry, avail, full_again
  end
  return true, used, limit - used - cost, math.ceil(window), 0, avail, full_again
end

-- Members added per ZADD: bounds the arguments of one call (Lua's unpack has a stack limit).
local SLIDING_ZADD_CHUNK = 256

-- Adds `cost` units at now, at most `limit` of them, and drops the oldest members beyond
-- `limit`. Only a post-charge (whose step ran with an unbounded limit) can pass the limit: a
-- check that allowed never does, and skips the trim.
local function sliding_window_commit(key, used, now, limit, window, cost_arg)
  local score = string.format('%.17g', now)
  local add = tonumber(cost_arg)
  if add > limit then add = limit end
  -- Members are unique: a timestamp's units are numbered after the ones it already holds
  -- ("<time>:<n>"). Only a trim that leaves nothing but this timestamp's units can make a
  -- number repeat, and then every unit has the same score anyway.
  local base = redis.call('ZCOUNT', key, score, score)
  local args = {}
  for j = 1, add do
    args[#args + 1] = score
    args[#args + 1] = score .. ':' .. (base + j)
    if #args >= 2 * SLIDING_ZADD_CHUNK or j == add then
      redis.call('ZADD', key, unpack(args))
      args = {}
    end
  end
  if used + add > limit then
    local excess = redis.call('ZCARD', key) - limit
    if excess > 0 then redis.call('ZREMRANGEBYRANK', key, 0, excess - 1) end
  end
  redis.call('PEXPIRE', key, math.ceil(window) + STATE_TTL_SLACK_MS)
end

-- The request's units are members at exactly its time; the highest numbers go, so the numbers
-- left at that time stay 1..n, as sliding_window_commit expects.
local function sliding_window_refund(key, at, _, _, _, units_arg)
  local units = tonumber(units_arg)
  local score = string.format('%.17g', at)
  local members = redis.call('ZRANGEBYSCORE', key, score, score)
  if #members == 0 then return 0 end
  local numbered = {}
  for _, m in ipairs(members) do numbered[#numbered + 1] = { tonumber(string.match(m, ':(%d+)$')) or 0, m } end
  table.sort(numbered, function(a, b) return a[1] > b[1] end)
  for j = 1, math.min(units, #numbered) do redis.call('ZREM', key, numbered[j][2]) end
  return 1
end

-- Sliding window counter. State: one string "<window start ms> <previous count> <current count>";
-- the previous window is weighted by the share of it still inside the sliding window.
-- pending: the string to write.
local function sliding_counter_step(key, now, limit, w, cost_arg)
  local cost = tonumber(cost_arg)
  local raw = read_string(key)
  local start = math.floor(now / w) * w
  local prev, cur = 0, 0
  if raw then
    local s, p, c = string.match(raw, '^(%S+) (%S+) (%S+)$')
    s = tonumber(s)
    if s == start then
      prev, cur = tonumber(p), tonumber(c)
    elseif s == start - w then
      prev = tonumber(c)
    end
  end
  local elapsed = now - start
  local estimated = (prev * (w - elapsed)) / w + cur
  local reset = 0
  if cur > 0 then reset = math.ceil(start + 2 * w - now) elseif prev > 0 then reset = math.ceil(start + w - now) end
  local avail = math.floor(limit - estimated)
  if avail < 0 then avail = 0 end
  if estimated + cost > limit then
    local retry
    if cost > limit then
      retry = 2 * w
    elseif cur + cost <= limit then
      retry = w - elapsed - ((limit - cur - cost) * w) / prev
    else
      local decay = 0
      if cur > 0 then decay = w * (1 - (limit - cost) / cur) end
      retry = start + w - now + decay
    end
    retry = math.ceil(retry)
    if retry < 1 then retry = 1 end
    return false, nil, avail, reset, retry, avail, reset
  end
  local remaining = math.floor(limit - estimated - cost)
  if remaining < 0 then remaining = 0 end
  local full = math.ceil(start + 2 * w - now)
  return true, string.format('%.17g %d %d', start, prev, cur + cost), remaining, full, 0, avail, reset
end

-- The key lives until both windows have passed (the step's reset_ms when allowed), plus the slack.
local function sliding_counter_commit(key, value, now, _, w)
  local start = math.floor(now / w) * w
  write_string(key, value, math.ceil(start + 2 * w - now) + STATE_TTL_SLACK_MS)
end

-- The units count in the window they were taken in: the current one, or the previous one once
-- the state has moved on a window.
local function sliding_counter_refund(key, at, _, _, w, units_arg)
  local units = tonumber(units_arg)
  local raw = redis.call('GET', key)
  if not raw then return 0 end
  local s, p, c = string.match(raw, '^(%S+) (%S+) (%S+)$')
  s, p, c = tonumber(s), tonumber(p), tonumber(c)
  local start = math.floor(at / w) * w
  if s == start then
    rewrite_window(key, string.format('%.17g %d %d', s, p, math.max(0, c - units)))
    return 1
  elseif s == start + w then
    rewrite_window(key, string.format('%.17g %d %d', s, math.max(0, p - units), c))
    return 1
  end
  return 0
end

ALGORITHMS[2] = { step = fixed_window_step, commit = fixed_window_commit, refund = fixed_window_refund, cached = true }
ALGORITHMS[3] = { step = sliding_window_step, commit = sliding_window_commit, refund = sliding_window_refund }
ALGORITHMS[4] = { step = sliding_counter_step, commit = sliding_counter_commit, refund = sliding_counter_refund, cached = true }
