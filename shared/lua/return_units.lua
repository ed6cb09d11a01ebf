-- return_units.lua: an unpaid order expired in DynamoDB; give its units
-- back to the sale in Redis and let the buyer buy again.
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders).
-- ARGV[1] orderId  ARGV[2] userId  ARGV[3] quantity  ARGV[4] nowMs
-- ARGV[5] the expiry's position in the ledger (the sale item's `returnSeq`
--         the expiry set), or "" when unknown
-- ARGV[6] how many of the units go back to the stock (absent: all): the
--         rest were offered to the waitlist, as orders of other buyers
--
-- A return is applied once, whatever the order of expiry, rebuild,
-- redelivery and reconcile:
-- - the reservation entry records state EXPIRED (it is created as a marker
--   if there was none), so a second run returns nothing;
-- - a sale loaded from the ledger records the `returnSeq` it read
--   (meta `ledgerSeq`): an expiry at or before it is already in the stock
--   and the buyers' counts it loaded, so only the marker is written;
-- - a stock reset to the ledger's figure records the `returnSeq` that
--   figure is at (meta `stockSeq`, set_stock.lua): an expiry at or before
--   it is already in the stock, so only the buyer's count goes down.
-- Stock goes back capped at the total.
-- Replies: {"RETURNED", stockNow} {"SAME"} {"MISSING"}
--
-- Runs with holdings.lua prepended (see adapters/redis/scripts.rs) for drop_holding().
-- Every change bumps meta `epoch` (reconcile's chunked read; see snapshot_head.lua).

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, user, qty, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local seq = tonumber(ARGV[5] or '')
local to_stock = tonumber(ARGV[6] or '') or qty

local total = tonumber(redis.call('HGET', meta_key, 'total'))
local stock = tonumber(redis.call('GET', stock_key))
if not total or not stock then
  return {'MISSING'}
end
local raw = redis.call('HGET', resv_key, order_id)
local resv
if raw then
  resv = cjson.decode(raw)
  if resv.state == 'EXPIRED' then
    return {'SAME'}
  end
else
  resv = {userId = user, quantity = qty, atMs = now}
end

resv.state = 'EXPIRED'
redis.call('HSET', resv_key, order_id, cjson.encode(resv))
redis.call('HINCRBY', meta_key, 'epoch', 1)
local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
if expire_at then
  redis.call('PEXPIREAT', resv_key, expire_at)
end

local ledger = tonumber(redis.call('HGET', meta_key, 'ledgerSeq'))
if seq and ledger and seq <= ledger then
  return {'SAME'}
end

drop_holding(buyers_key, uorders_key, user, qty, order_id)
local reset = tonumber(redis.call('HGET', meta_key, 'stockSeq'))
if seq and reset and seq <= reset then
  return {'SAME'}
end
if to_stock <= 0 then
  return {'RETURNED', tostring(stock)}
end
local back = math.min(stock + to_stock, total)
redis.call('SET', stock_key, back, 'KEEPTTL')
return {'RETURNED', tostring(back)}
