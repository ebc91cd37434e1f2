-- Concurrency; the same arithmetic as src/limits/concurrency.ts, operation for operation.
-- State: a sorted set of lease ids, each scored by the time (ms) its lease expires. A lease is
-- live while now < its expiry. Returns what the other steps return (see windows.lua); the
-- pending value is the ms until the last lease of the set expires once this one is added.
local CONCURRENCY_RETRY_CAP_MS = 1000

local function concurrency_step(key, now, max_in_flight, lease)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%.17g', now))
  local used = redis.call('ZCARD', key)
  local earliest, latest = 0, 0
  if used > 0 then
    local first = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
    earliest = math.ceil(tonumber(first[2]) - now)
    latest = math.ceil(tonumber(last[2]) - now)
  end
  local avail = max_in_flight - used
  if avail < 0 then avail = 0 end
  if used + 1 > max_in_flight then
    local retry = earliest
    if retry > CONCURRENCY_RETRY_CAP_MS then retry = CONCURRENCY_RETRY_CAP_MS end
    if retry < 1 then retry = 1 end
    return false, nil, avail, latest, retry, avail, latest
  end
  local full = math.ceil(lease)
  if latest > full then full = latest end
  return true, full, max_in_flight - used - 1, full, 0, avail, latest
end

local function concurrency_commit(key, lease_id, now, lease, full)
  redis.call('ZADD', key, string.format('%.17g', now + lease), lease_id)
  redis.call('PEXPIRE', key, full + 1000)
end
