-- Extends concurrency leases still held by requests in flight (a long download, a WebSocket),
-- so a slot outlives `lease` only while its gateway keeps renewing it. A lease already released
-- or expired is not brought back (ZADD XX).
-- Composed after the algorithm files (see src/limits/stores/scripts.ts).
--
--   KEYS[1]   the concurrency key (one per call: leases of one request may span hash tags)
--   ARGV[1]   now in ms, or "" to read the Redis clock
--   ARGV[2]   lease_ms
--   ARGV[3..] lease ids
-- Reply: how many leases were extended.

local now = script_now(ARGV[1])
local lease = tonumber(ARGV[2])
local until_ms = now + lease
local renewed = 0
for i = 3, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], 'XX', string.format('%.17g', until_ms), ARGV[i])
    renewed = renewed + 1
  end
end
if renewed > 0 then
  local ttl = redis.call('PTTL', KEYS[1])
  local wanted = math.ceil(lease) + 1000
  if ttl < wanted then redis.call('PEXPIRE', KEYS[1], wanted) end
end
return renewed
