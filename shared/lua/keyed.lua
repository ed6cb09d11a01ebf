-- keyed.lua: the filter of a key group's Idempotency-Key reservations.
-- Prepended to purchase.lua and rebuild.lua (see adapters/redis/scripts.rs), which
-- mark every reservation whose order id starts with 'k'; keyed_filter.lua
-- reads it for the sold-out fast path of keyed requests.
--
-- keyed_key  sale:{S}:keyed  string  a bitmap of M bits, M fixed when it is
--            created (its length x 8, read by both sides, so an edited total
--            never moves a bit): 32 bits per unit of the group's total, a
--            power of two from 2^13 to 2^24. A 'k' order id sets two bits,
--            the first and the next 8 hex digits after the 'k' (a SHA-1 of
--            sale|user|key) modulo M. A bit clear: no such reservation was
--            ever made here. Bits are never cleared (a released or rejected
--            reservation only makes the filter answer "maybe").

-- Creates the filter for a group of `total` units unless it exists; its
-- size in bits.
local function keyed_create(keyed_key, total)
  local m = redis.call('STRLEN', keyed_key) * 8
  if m == 0 then
    local want = 32 * (tonumber(total) or 0)
    m = 8192
    while m < want and m < 16777216 do
      m = m * 2
    end
    redis.call('SETBIT', keyed_key, m - 1, 0)
  end
  return m
end

local function keyed_mark(keyed_key, meta_key, order_id)
  local m = redis.call('STRLEN', keyed_key) * 8
  if m == 0 then
    m = keyed_create(keyed_key, redis.call('HGET', meta_key, 'total'))
  end
  redis.call('SETBIT', keyed_key, tonumber(string.sub(order_id, 2, 9), 16) % m, 1)
  redis.call('SETBIT', keyed_key, tonumber(string.sub(order_id, 10, 17), 16) % m, 1)
end
