-- receive.lua: the home shard takes the units another shard lent it, once.
--
-- KEYS[1] sale:{S:k}:meta  KEYS[2] sale:{S:k}:stock  KEYS[3] sale:{S:k}:received
-- ARGV[1] transfer id  ARGV[2] units
--
-- Idempotent by transfer id, so the purchase and reconcile may both run it.
-- Replies: {"RECEIVED", stockNow} {"ALREADY"} {"MISSING"}
-- Every change bumps meta `epoch` (reconcile's chunked read; see snapshot_head.lua).

if redis.call('EXISTS', KEYS[2]) == 0 then
  return {'MISSING'}
end
if redis.call('HSETNX', KEYS[3], ARGV[1], ARGV[2]) == 0 then
  return {'ALREADY'}
end
local now = redis.call('INCRBY', KEYS[2], tonumber(ARGV[2]))
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'epoch', 1)
end
local expire_at = tonumber(redis.call('HGET', KEYS[1], 'expireAtMs'))
if expire_at then
  redis.call('PEXPIREAT', KEYS[3], expire_at)
end
return {'RECEIVED', tostring(now)}
