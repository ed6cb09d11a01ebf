-- snapshot.lua: everything Redis holds for a sale, read in one atomic step
-- so reconciliation compares numbers taken at one instant.
-- KEYS meta, stock, buyers, resv.
-- Reply: {"MISSING"} or {"OK", stock, total, buyersFlat, resvFlat}
-- where the flat lists are HGETALL replies.
local total = redis.call('HGET', KEYS[1], 'total')
local stock = redis.call('GET', KEYS[2])
if not total or not stock then
  return {'MISSING'}
end
return {'OK', stock, total, redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4])}
