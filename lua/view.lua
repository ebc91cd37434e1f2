-- The Redis clock in ms (microsecond precision).
local function redis_clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
end

-- The head of every deciding script's reply: Redis's clock (the gateway learns its offset from
-- it), then 1, or 0 when the clock is past the caller's deadline (ARGV, "" for none): the
-- gateway has answered without this script, so it must write nothing and say so.
local function open_reply(deadline_arg)
  local clock = redis_clock()
  local reply = { string.format('%.17g', clock), 1 }
  local deadline = tonumber(deadline_arg)
  if deadline ~= nil and clock > deadline then reply[2] = 0 end
  return reply, clock
end

-- The time a script decides at: ARGV's "now" in ms when a test passes one, else the Redis clock.
local function script_now(arg)
  local now = tonumber(arg)
  if now == nil then now = redis_clock() end
  return now
end

-- What a zero-cost check of one limit sees: remaining and reset_ms, nothing committed. Used by
-- charge.lua (the state after a post-charge) and peek.lua (the admin API's read).
local function limit_view(k, now, algorithm, p1, p2)
  if algorithm == 1 or algorithm == 5 then
    return select(6, token_bucket_step(tonumber(redis.call('GET', k)), now, p1, p2, 0))
  elseif algorithm == 2 then
    return select(6, fixed_window_step(redis.call('GET', k), now, p1, p2, 0))
  elseif algorithm == 3 then
    return select(6, sliding_window_step(k, now, p1, p2, 0))
  elseif algorithm == 4 then
    return select(6, sliding_counter_step(redis.call('GET', k), now, p1, p2, 0))
  elseif algorithm == 6 then
    return select(6, concurrency_step(k, now, p1, p2))
  end
  return nil
end
