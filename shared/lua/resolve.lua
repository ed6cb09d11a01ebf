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
  local user = tostring(resv.userId)
  local qty = tonumber(resv.quantity) or 0
  local held = redis.call('HINCRBY', buyers_key, user, -qty)
  if held <= 0 then
    redis.call('HDEL', buyers_key, user)
  end
  local listed = redis.call('HGET', uorders_key, user)
  if listed then
    local kept = {}
    for id in string.gmatch(listed, '[^,]+') do
      if id ~= order_id then
        kept[#kept + 1] = id
      end
    end
    if #kept == 0 then
      redis.call('HDEL', uorders_key, user)
    else
      redis.call('HSET', uorders_key, user, table.concat(kept, ','))
    end
  end
end

resv.state = state
redis.call('HSET', resv_key, order_id, cjson.encode(resv))
return {'OK'}
