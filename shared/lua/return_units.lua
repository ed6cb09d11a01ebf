-- return_units.lua: an unpaid order expired in DynamoDB; give its units
-- back to the sale in Redis and let the buyer buy again.
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders).
-- ARGV[1] orderId  ARGV[2] userId  ARGV[3] quantity  ARGV[4] nowMs
--
-- Idempotent: the reservation entry records state EXPIRED (it is created as
-- a marker if the sale was rebuilt without it), so a second run returns
-- nothing. Stock goes back capped at the total.
-- Replies: {"RETURNED", stockNow} {"SAME"} {"MISSING"}
--
-- Runs with holdings.lua prepended (see redis_store.rs) for drop_holding().

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, user, qty, now = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]

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

drop_holding(buyers_key, uorders_key, user, qty, order_id)

resv.state = 'EXPIRED'
redis.call('HSET', resv_key, order_id, cjson.encode(resv))
local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
if expire_at then
  redis.call('PEXPIREAT', resv_key, expire_at)
end
local back = math.min(stock + qty, total)
redis.call('SET', stock_key, back, 'KEEPTTL')
return {'RETURNED', tostring(back)}
