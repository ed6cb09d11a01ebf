-- holding.lua: one buyer's count and live reservations, read in one step
-- (read only), so reconcile compares a count with the reservations behind
-- it as they stood at one instant. Bounded by the buyer's own orders.
-- KEYS[1] buyers  KEYS[2] userorders  KEYS[3] resv   ARGV[1] userId
-- Reply: {count or "", orderId, reservationJson ("" when gone), ...}: the
-- order ids the buyer's list holds (every QUEUED or WRITTEN reservation of
-- theirs is on it; see holdings.lua), each with its reservation.
local out = {redis.call('HGET', KEYS[1], ARGV[1]) or ''}
local listed = redis.call('HGET', KEYS[2], ARGV[1])
if listed then
  for id in string.gmatch(listed, '[^,]+') do
    out[#out + 1] = id
    out[#out + 1] = redis.call('HGET', KEYS[3], id) or ''
  end
end
return out
