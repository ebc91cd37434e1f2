-- Window algorithms; the same arithmetic as src/limits/windows.ts, operation for operation.
-- Each *_step returns: allowed, pending (what commit writes), remaining, reset_ms,
-- retry_after_ms, available_now, reset_now_ms (the last two: what to report when another
-- limit of the request denies it).

-- Fixed window. State: one string "<window start ms> <count>".
local function fixed_window_step(raw, now, limit, window, cost)
  local start = math.floor(now / window) * window
  local used = 0
  if raw then
    local s, c = string.match(raw, '^(%S+) (%S+)$')
    if tonumber(s) == start then used = tonumber(c) end
  end
  local reset = math.ceil(start + window - now)
  local avail = limit - used
  if avail < 0 then avail = 0 end
  if used + cost > limit then
    return false, nil, avail, reset, reset, avail, reset
  end
  local pending = { value = string.format('%.17g %d', start, used + cost), ttl = reset + 1000 }
  return true, pending, limit - used - cost, reset, 0, avail, reset
end

local function fixed_window_commit(key, pending)
  redis.call('SET', key, pending.value, 'PX', pending.ttl)
end

-- Sliding window log. State: a sorted set, one member per admitted unit, scored by its time;
-- a unit admitted at t counts while now < t + window. Only the newest `limit` units can ever
-- decide anything (older ones leave the window first, and `limit` units already deny), so a
-- post-charge past the limit keeps just those: at most `limit` members, whatever was charged.
local function sliding_window_step(key, now, limit, window, cost)
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

-- Adds `cost` units at now; with `limit` (a post-charge), at most `limit` of them, and the
-- oldest members beyond `limit` are dropped. A check passes no limit: it never exceeds it.
local function sliding_window_commit(key, now, window, cost, limit)
  local score = string.format('%.17g', now)
  local add = cost
  if limit ~= nil and add > limit then add = limit end
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
  if limit ~= nil then
    local excess = redis.call('ZCARD', key) - limit
    if excess > 0 then redis.call('ZREMRANGEBYRANK', key, 0, excess - 1) end
  end
  redis.call('PEXPIRE', key, math.ceil(window) + 1000)
end

-- Sliding window counter. State: one string "<window start ms> <previous count> <current count>";
-- the previous window is weighted by the share of it still inside the sliding window.
local function sliding_counter_step(raw, now, limit, w, cost)
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
  local pending = { value = string.format('%.17g %d %d', start, prev, cur + cost), ttl = full + 1000 }
  return true, pending, remaining, full, 0, avail, reset
end
