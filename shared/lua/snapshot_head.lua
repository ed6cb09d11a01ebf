-- snapshot_head.lua: the few numbers of one key group that reconcile reads
-- before and after it reads the group's hashes in chunks (HSCAN), in one
-- O(1) step. Equal before and after means no script changed the stock or a
-- reservation in between (see the chunked read in adapters/redis/snapshot.rs): every
-- script that changes them bumps meta `epoch`, except purchase.lua, which
-- always lowers the stock.
-- KEYS meta, stock, resv, and for a shard also lent, received.
-- Reply: {"MISSING"} or {"OK", stock, total, version, epoch, stockSeq,
-- #resv [, #lent, #received]}; stockSeq is "" until a stock reset set it
-- (set_stock.lua).
local m = redis.call('HMGET', KEYS[1], 'total', 'version', 'epoch', 'stockSeq')
local stock = redis.call('GET', KEYS[2])
if not m[1] or not stock then
  return {'MISSING'}
end
local out = {'OK', stock, m[1], m[2] or '', m[3] or '0', m[4] or '',
  tostring(redis.call('HLEN', KEYS[3]))}
if KEYS[4] then
  out[#out + 1] = tostring(redis.call('HLEN', KEYS[4]))
  out[#out + 1] = tostring(redis.call('HLEN', KEYS[5]))
end
return out
