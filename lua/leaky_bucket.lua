-- Leaky bucket as a queue; the same reading of the GCRA as src/limits/algorithms/leaky-bucket.ts.
-- It is token_bucket.lua's step with a tolerance of queue + 1 intervals (param 1 is queue + 1),
-- so it is composed after that file and shares its commit and refund. An admitted
-- request is served at the TAT it found: its delay (the fourth value) is reset_now from now.
local function leaky_bucket_step(key, now, slots, interval, cost_arg)
  local ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now =
    token_bucket_step(tonumber(read_string(key)), now, slots, interval, tonumber(cost_arg))
  if ok then retry_ms = reset_now end
  return ok, nxt, remaining, reset_ms, retry_ms, available_now, reset_now
end

ALGORITHMS[5] = { step = leaky_bucket_step, commit = token_bucket_commit, refund = token_bucket_refund, cached = true }
