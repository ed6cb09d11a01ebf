-- buyer_orders.lua: one buyer's reservations of a sale (read only), for
-- GET /sales/{saleId}/orders: the order ids the buyer holds (userorders)
-- and each one's reservation.
-- KEYS[1] userorders  KEYS[2] resv   ARGV[1] userId
-- The userId (any characters, `,` included) is the hash field; the value
-- split on `,` holds order ids only, whose alphabet has no `,`.
-- Reply: a flat list orderId, reservationJson ("" when gone).
local listed = redis.call('HGET', KEYS[1], ARGV[1])
local out = {}
if not listed then
  return out
end
for id in string.gmatch(listed, '[^,]+') do
  out[#out + 1] = id
  out[#out + 1] = redis.call('HGET', KEYS[2], id) or ''
end
return out
