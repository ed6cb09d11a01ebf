-- reserve.lua: prepended to the scripts that reserve units (purchase, the
-- lottery's draw_chunk), so a drawn ticket is reserved exactly as a
-- purchase is, by the same lines.

-- Takes `qty` units for `user` as the QUEUED reservation `order_id`: the
-- stock down, the sell-out's moment recorded once (by the call that takes
-- the last unit: GET /admin/sales/{saleId}'s soldOutAt, one write per
-- sale), the buyer's count up, the reservation (the outbox reconcile
-- relays from) and the buyer's list of orders (409 LIMIT_EXCEEDED's). The
-- caller has checked the stock and the limit. Returns the units left.
local function reserve(meta_key, stock_key, buyers_key, resv_key, uorders_key,
                       user, qty, order_id, now)
  local left = redis.call('DECRBY', stock_key, qty)
  if left == 0 then
    redis.call('HSETNX', meta_key, 'soldOutAtMs', tostring(now))
  end
  redis.call('HINCRBY', buyers_key, user, qty)
  redis.call('HSET', resv_key, order_id, cjson.encode({
    userId = user, quantity = qty, atMs = tostring(now), state = 'QUEUED' }))
  local listed = redis.call('HGET', uorders_key, user)
  if listed and listed ~= '' then
    redis.call('HSET', uorders_key, user, listed .. ',' .. order_id)
  else
    redis.call('HSET', uorders_key, user, order_id)
  end
  return left
end

