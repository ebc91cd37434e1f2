-- Concurrency; the same arithmetic as src/limits/algorithms/concurrency.ts, operation for
-- operation. Registered as code 6; params: max_in_flight, lease_ms.
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

-- The check's cost argument is the request's lease id: a request holds one slot, whatever it costs.
local function concurrency_commit(key, full, now, _, lease, lease_id)
  redis.call('ZADD', key, string.format('%.17g', now + lease), lease_id)
  redis.call('PEXPIRE', key, full + STATE_TTL_SLACK_MS)
end

-- A refund releases the lease the check took.
local function concurrency_refund(key, _, _, _, _, lease_id)
  return redis.call('ZREM', key, lease_id)
end

-- Extends the leases ids[first..] still held on `key` to `lease` from now; a lease already
-- released or expired is not brought back (ZADD XX). Returns how many were extended.
local function concurrency_renew(key, now, lease, ids, first)
  local until_ms = now + lease
  local renewed = 0
  for i = first, #ids do
    if redis.call('ZSCORE', key, ids[i]) then
      redis.call('ZADD', key, 'XX', string.format('%.17g', until_ms), ids[i])
      renewed = renewed + 1
    end
  end
  if renewed > 0 then
    local ttl = redis.call('PTTL', key)
    local wanted = math.ceil(lease) + STATE_TTL_SLACK_MS
    if ttl < wanted then redis.call('PEXPIRE', key, wanted) end
  end
  return renewed
end

-- A request holds one slot whatever it cost: a post-charge leaves the limit as it is.
ALGORITHMS[6] = { step = concurrency_step, commit = concurrency_commit, refund = concurrency_refund, holds_slot = true }
