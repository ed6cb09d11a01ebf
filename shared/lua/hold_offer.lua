-- hold_offer.lua: the ledger wrote an order the waitlist was offered (an
-- expired order's unit, handed to the head of the line); its buyer now
-- holds it, and Redis counts it for their limit, once.
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders), of the
-- order's shard (its id names it).
-- ARGV[1] orderId  ARGV[2] userId  ARGV[3] quantity  ARGV[4] atMs
-- ARGV[5] the handover's position in the ledger (the sale item's
--         `returnSeq` it set)
--
-- Once per order: its reservation entry (state WRITTEN) is the marker. A
-- sale loaded from the ledger at or after the handover's position counted
-- the order when it loaded the buyers: only the marker is written then.
-- The stock is not touched: the unit went from one buyer to another.
-- Replies: {"HELD"} {"SAME"} {"MISSING"}

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, user, qty, at = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local seq = tonumber(ARGV[5] or '')

if not tonumber(redis.call('HGET', meta_key, 'total')) or not redis.call('GET', stock_key) then
  return {'MISSING'}
end
if redis.call('HEXISTS', resv_key, order_id) == 1 then
  return {'SAME'}
end
redis.call('HSET', resv_key, order_id,
  cjson.encode({userId = user, quantity = qty, atMs = at, state = 'WRITTEN'}))
redis.call('HINCRBY', meta_key, 'epoch', 1)
local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
local ledger = tonumber(redis.call('HGET', meta_key, 'ledgerSeq'))
if not (seq and ledger and seq <= ledger) then
  redis.call('HINCRBY', buyers_key, user, qty)
  local listed = redis.call('HGET', uorders_key, user)
  if listed and listed ~= '' then
    redis.call('HSET', uorders_key, user, listed .. ',' .. order_id)
  else
    redis.call('HSET', uorders_key, user, order_id)
  end
end
if expire_at then
  redis.call('PEXPIREAT', resv_key, expire_at)
  redis.call('PEXPIREAT', buyers_key, expire_at)
  redis.call('PEXPIREAT', uorders_key, expire_at)
end
return {'HELD'}
