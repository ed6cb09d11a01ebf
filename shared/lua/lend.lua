-- lend.lua: a shard gives units to a buyer's home shard that ran out.
--
-- KEYS[1] sale:{S:j}:meta  KEYS[2] sale:{S:j}:stock  KEYS[3] sale:{S:j}:lent
-- ARGV[1] transfer id  ARGV[2] units the home shard needs  ARGV[3] home
-- shard  ARGV[4] now (ms)
--
-- Gives max(need, half of what it has), capped by what it has, and records
-- the transfer in its `lent` hash in the same step. The home shard credits
-- it with receive.lua; if the caller dies in between, reconcile finds the
-- transfer in `lent` and not in the home shard's `received`, and completes it.
-- Idempotent by transfer id: a run again (a client that resent the call
-- after a dropped connection) answers what the first run lent.
-- Replies: {"LENT", units} or {"SHORT"} (nothing to give) or {"MISSING"}
-- Every change bumps meta `epoch` (reconcile's chunked read; see snapshot_head.lua).

local stock = tonumber(redis.call('GET', KEYS[2]))
if not stock then
  return {'MISSING'}
end
local prior = redis.call('HGET', KEYS[3], ARGV[1])
if prior then
  return {'LENT', string.match(prior, '^[^:]*:([^:]*):')}
end
local need = tonumber(ARGV[2])
if not need or need < 1 then
  return redis.error_reply('ERR need must be a positive integer')
end
if stock < 1 then
  return {'SHORT'}
end
local give = math.min(stock, math.max(need, math.floor(stock / 2)))
local left = redis.call('DECRBY', KEYS[2], give)
-- A shard emptied by lending ran dry too: with every shard's first dry
-- moment kept, the latest is the sharded sale's sell-out (as purchase.lua
-- records it for the shard that sells its last unit).
if left == 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HSETNX', KEYS[1], 'soldOutAtMs', ARGV[4])
end
redis.call('HSET', KEYS[3], ARGV[1], ARGV[3] .. ':' .. give .. ':' .. ARGV[4])
if redis.call('EXISTS', KEYS[1]) == 1 then
  redis.call('HINCRBY', KEYS[1], 'epoch', 1)
end
local expire_at = tonumber(redis.call('HGET', KEYS[1], 'expireAtMs'))
if expire_at then
  redis.call('PEXPIREAT', KEYS[3], expire_at)
end
return {'LENT', tostring(give)}
