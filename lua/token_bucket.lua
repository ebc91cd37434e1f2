-- Token bucket as GCRA; the same arithmetic as src/limits/algorithms/token-bucket.ts, operation
-- for operation (the conformance suite compares the two on identical inputs). Registered as code 1.
--   state: one string, the theoretical arrival time (ms) at which the bucket is full again.
--   params: burst, interval_ms (time to earn back one token).
local EPSILON_MS = 1e-6

-- Returns allowed (bool), next_tat, remaining, reset_ms, retry_after_ms, and what to report
-- when another limit of the request denies it (nothing consumed): available_now, reset_now_ms.
local function token_bucket_step(tat, now, burst, interval, cost)
  local tolerance = burst * interval
  local base = now
  if tat ~= nil and tat >= now then base = tat end
  local next_tat = base + cost * interval
  local allow_at = next_tat - tolerance
  local available_now = math.floor((tolerance - (base - now)) / interval + EPSILON_MS)
  if available_now < 0 then available_now = 0 end
  local reset_now = math.ceil(base - now)
  if allow_at - now > EPSILON_MS then
    return false, base, available_now, reset_now, math.ceil(allow_at - now), available_now, reset_now
  end
  local remaining = math.floor((tolerance - (next_tat - now)) / interval + EPSILON_MS)
  if remaining < 0 then remaining = 0 end
  return true, next_tat, remaining, math.ceil(next_tat - now), 0, available_now, reset_now
end

-- Stores the new TAT; the key lives until the bucket is full again, plus the slack.
local function token_bucket_commit(key, next_tat, now)
  write_string(key, string.format('%.17g', next_tat), math.ceil(next_tat - now) + STATE_TTL_SLACK_MS)
end

-- A batch for an instance's reservation: at least `want` tokens (else denied like a request of
-- `want`), up to `batch` of what is available now. Returns the step's values and the tokens taken.
local function token_bucket_batch_step(tat, now, burst, interval, want, batch)
  local ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now =
    token_bucket_step(tat, now, burst, interval, want)
  if not ok then return ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now, 0 end
  local take = math.min(batch, available_now)
  if take < want then take = want end
  local ok2, nxt2, remaining2, reset2, retry2, available2, reset_now2 = token_bucket_step(tat, now, burst, interval, take)
  if ok2 then return ok2, nxt2, remaining2, reset2, retry2, available2, reset_now2, take end
  return ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now, want
end

-- The entry's step (lua/prelude.lua). The cost is a number, or "<want>:<batch>" for an instance's
-- reservation: then the fourth value, when allowed, is the tokens taken.
local function token_bucket_check(key, now, burst, interval, cost_arg)
  local tat = tonumber(read_string(key))
  local cost = tonumber(cost_arg)
  if cost ~= nil then return token_bucket_step(tat, now, burst, interval, cost) end
  local want, batch = string.match(cost_arg, '^(%d+):(%d+)$')
  local ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now, taken =
    token_bucket_batch_step(tat, now, burst, interval, tonumber(want), tonumber(batch))
  if ok then retry_ms = taken end
  return ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now
end

-- The TAT moves back by what the request advanced it; at or before now the bucket is full.
local function token_bucket_refund(key, _, current, _, interval, units_arg)
  local units = tonumber(units_arg)
  local raw = redis.call('GET', key)
  if not raw then return 0 end
  local back = tonumber(raw) - units * interval
  if back <= current then redis.call('DEL', key) else token_bucket_commit(key, back, current) end
  return 1
end

ALGORITHMS[1] = { step = token_bucket_check, commit = token_bucket_commit, refund = token_bucket_refund, cached = true }
