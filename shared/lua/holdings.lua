-- holdings.lua: prepended to the scripts that take units away from a buyer
-- (release, resolve, return_units), so the bookkeeping is written once.

-- The buyer no longer holds this order: their count goes down by its units
-- and the order leaves their list (used by 409 LIMIT_EXCEEDED). `user` is
-- a hash field (any characters); the list holds order ids, which have no `,`.
local function drop_holding(buyers_key, uorders_key, user, qty, order_id)
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

