-- Extends concurrency leases still held by requests in flight (a long download, a WebSocket),
-- so a slot outlives `lease` only while its gateway keeps renewing it. A lease already released
-- or expired is not brought back (ZADD XX).
-- Composed after the algorithm files (see src/limits/stores/redis/scripts.ts); the leases are
-- the concurrency algorithm's, and lua/concurrency.lua renews them.
--
--   KEYS[1]   the concurrency key (one per call: leases of one request may span hash tags)
--   ARGV[1]   now in ms, or "" to read the Redis clock
--   ARGV[2]   lease_ms
--   ARGV[3..] lease ids
-- Reply: how many leases were extended.

return concurrency_renew(KEYS[1], script_now(ARGV[1]), tonumber(ARGV[2]), ARGV, 3)
