-- snapshot.lua: everything Redis holds for a key group, read in one atomic
-- step. Its work grows with the buyers and reservations, so only the rebuild
-- of lost shards reads the surviving ones with it (rare, after a node was
-- lost); reconcile reads in bounded chunks (snapshot_head.lua, HSCAN).
-- KEYS meta, stock, buyers, resv, and for a shard also lent, received.
-- Reply: {"MISSING"} or {"OK", stock, total, buyersFlat, resvFlat
-- [, lentFlat, receivedFlat]} where the flat lists are HGETALL replies.
local total = redis.call('HGET', KEYS[1], 'total')
local stock = redis.call('GET', KEYS[2])
if not total or not stock then
  return {'MISSING'}
end
if KEYS[5] then
  return {'OK', stock, total, redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4]),
    redis.call('HGETALL', KEYS[5]), redis.call('HGETALL', KEYS[6])}
end
return {'OK', stock, total, redis.call('HGETALL', KEYS[3]), redis.call('HGETALL', KEYS[4])}
