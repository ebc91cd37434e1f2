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

-- A TAT key's expiry sits on a grid of half the slack: a write that sets it sets it to the end of
-- the step after the one holding the TAT, and a write whose TAT stays in the step of the TAT it
-- replaces keeps the expiry the key has (write_string's keep: most writes of a busy key). Every
-- write so leaves the key expiring after the end of its TAT's step: one that sets the expiry by
-- construction, one that keeps it because its TAT is in the step of the last, and one by an
-- earlier version of this script (TAT + slack) because a step is half the slack. So the key
-- never expires before its bucket is full again (a decision that finds it gone finds a full
-- bucket, as it would have), and it expires at most the slack after.
local TAT_EXPIRY_STEP_MS = STATE_TTL_SLACK_MS / 2

-- Stores the new TAT; the key lives until the bucket is full again, plus at most the slack.
local function token_bucket_commit(key, next_tat, now)
  local step = math.floor(next_tat / TAT_EXPIRY_STEP_MS)
  local replaced = tonumber(cached_string(key))
  write_string(key, string.format('%.17g', next_tat), math.ceil((step + 2) * TAT_EXPIRY_STEP_MS - now),
    replaced ~= nil and math.floor(replaced / TAT_EXPIRY_STEP_MS) == step)
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
