-- peek.lua: read-only view of a sale for the orders API.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] resv
-- ARGV[1] orderId, or "" for none
--
-- Reply: {"MISSING"} or {"OK", stock, status, reservationJson or ""}, or
-- {"SHARDED", n, homes} when these are the directory keys of a sale whose
-- stock lives in n shards (the caller then reads each shard); homes is the
-- directory's home table, "" for the uniform hash.
-- One script so the three reads are one round trip and one consistent view.

local total = redis.call('HGET', KEYS[1], 'total')
local shards = tonumber(redis.call('HGET', KEYS[1], 'shards'))
if total and shards and shards > 1 and redis.call('HGET', KEYS[1], 'directory') == '1' then
  return {'SHARDED', tostring(shards), redis.call('HGET', KEYS[1], 'homes') or ''}
end
local stock = redis.call('GET', KEYS[2])
if not total or not stock then
  return {'MISSING'}
end
local status = redis.call('HGET', KEYS[1], 'status') or 'LIVE'
local resv = ''
if ARGV[1] ~= '' then
  resv = redis.call('HGET', KEYS[3], ARGV[1]) or ''
end
return {'OK', stock, status, resv}
