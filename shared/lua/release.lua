-- release.lua: give back the stock of a reservation that is proven unused.
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders).
-- ARGV[1] orderId
--
-- Only a reservation still in state QUEUED, and never answered to a keyed
-- retry (`replayed`), is released: once its order is
-- written, its units belong to the order and only the unpaid-release path
-- may return them. The stock goes back capped at the sale's total, so a
-- double release can never create units.
--
-- Replies: {"RELEASED", stockNow} {"NOT_FOUND"} {"NOT_RELEASABLE", state} {"MISSING"}
--
-- Runs with holdings.lua prepended (see adapters/redis/scripts.rs) for drop_holding().
-- Every change bumps meta `epoch` (reconcile's chunked read; see snapshot_head.lua).

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id = ARGV[1]

local total = tonumber(redis.call('HGET', meta_key, 'total'))
local stock = tonumber(redis.call('GET', stock_key))
if not total or not stock then
  return {'MISSING'}
end

local raw = redis.call('HGET', resv_key, order_id)
if not raw then
  return {'NOT_FOUND'}
end
local resv = cjson.decode(raw)
if resv.state ~= 'QUEUED' then
  return {'NOT_RELEASABLE', tostring(resv.state)}
end
if resv.replayed then
  -- A keyed retry was answered with it (purchase.lua), and may have
  -- promised it (a 202 after its own send): not this caller's to give
  -- back, whatever this caller's send did.
  return {'NOT_RELEASABLE', 'REPLAYED'}
end
local qty = tonumber(resv.quantity) or 0
local user = tostring(resv.userId)

redis.call('HDEL', resv_key, order_id)

drop_holding(buyers_key, uorders_key, user, qty, order_id)

local back = math.min(stock + qty, total)
redis.call('SET', stock_key, back, 'KEEPTTL')
redis.call('HINCRBY', meta_key, 'epoch', 1)
return {'RELEASED', tostring(back)}
