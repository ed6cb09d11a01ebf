-- resolve.lua: record what became of a reservation once the order-writer
-- has dealt with its message.
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders).
-- ARGV[1] orderId   ARGV[2] new state: WRITTEN or REJECTED
--
-- WRITTEN: the order row exists; the reservation stays as the record that
-- lets reconciliation tell written, in flight and orphaned apart.
-- REJECTED: DynamoDB refused the units (Redis had let too many through).
-- The buyer holds nothing, so their count goes down and they may try again;
-- the stock is NOT returned to Redis: Redis over-counted it to begin with.
--
-- Replies: {"OK"} {"SAME"} {"NOT_FOUND"}
--
-- Runs with holdings.lua prepended (see redis_store.rs) for drop_holding().

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, state = ARGV[1], ARGV[2]
if state ~= 'WRITTEN' and state ~= 'REJECTED' then
  return redis.error_reply('ERR state must be WRITTEN or REJECTED')
end

local raw = redis.call('HGET', resv_key, order_id)
if not raw then
  return {'NOT_FOUND'}
end
local resv = cjson.decode(raw)
if resv.state == state or resv.state == 'REJECTED' then
  return {'SAME'}
end

if state == 'REJECTED' then
  drop_holding(buyers_key, uorders_key, tostring(resv.userId), tonumber(resv.quantity) or 0, order_id)
end

resv.state = state
redis.call('HSET', resv_key, order_id, cjson.encode(resv))
return {'OK'}
