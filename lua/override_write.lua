-- Sets or removes one runtime override (src/runtime/overrides.ts), keeping the caller's hash tidy:
-- its expired fields are dropped, its key expires after its latest override (plus slack, so that
-- the gateways' clocks, which decide expiry, need not agree with Redis's), and the index of
-- callers with overrides names it exactly while it exists.
--
-- KEYS[1]  the caller's hash: <prefix>{rt}:ovr:<caller>, field limit name → JSON record
-- KEYS[2]  the index set of callers with overrides: <prefix>{rt}:ovr-index
-- ARGV[1]  the caller's label (client:<id> or tenant:<id>), the index member
-- ARGV[2]  the limit name, the field; empty: only tidy (a hash that expired leaves the index)
-- ARGV[3]  the JSON record to set; empty: remove the field
-- ARGV[4]  now, epoch ms (the writing gateway's clock, the one expires_at was set by)
-- ARGV[5]  slack added to the key's expiry, ms
-- Returns 1 when the field held an override in force (replaced or removed), 0 when it did not.
local hash, index = KEYS[1], KEYS[2]
local caller, field, record = ARGV[1], ARGV[2], ARGV[3]
local now, slack = tonumber(ARGV[4]), tonumber(ARGV[5])

-- When a record expires: nil for one that cannot be read (it is dropped like an expired one).
local function expiry(text)
  local ok, decoded = pcall(cjson.decode, text)
  if not ok or type(decoded) ~= 'table' then return nil end
  return tonumber(decoded.expires_at)
end

local existed = 0
if field ~= '' then
  -- HGET answers false (not nil) for a missing field.
  local before = redis.call('HGET', hash, field)
  local at = nil
  if before then at = expiry(before) end
  if at ~= nil and at > now then existed = 1 end
  if record == '' then
    redis.call('HDEL', hash, field)
  else
    redis.call('HSET', hash, field, record)
  end
end

local latest = nil
local all = redis.call('HGETALL', hash)
for i = 1, #all, 2 do
  local at = expiry(all[i + 1])
  if at == nil or at <= now then
    redis.call('HDEL', hash, all[i])
  elseif latest == nil or at > latest then
    latest = at
  end
end

if latest == nil then
  redis.call('DEL', hash)
  redis.call('SREM', index, caller)
else
  redis.call('PEXPIREAT', hash, latest + slack)
  redis.call('SADD', index, caller)
end
return existed
