-- draw_order.lua: record the lottery draw's order, once.
--
-- KEYS[1] sale:{S}:meta     hash  windowEndMs, drawDone
-- KEYS[2] sale:{S}:tickets  hash  userId -> ticket JSON
-- KEYS[3] sale:{S}:drawq    list  the ticket holders in the draw's order
-- ARGV[1..n] every ticket holder, in the order of the draw (the caller
--            sorts them by HMAC-SHA256(seed, userId): domain/draw.rs)
--
-- Written only when absent (with its position, meta drawPos, beside it),
-- so every drawer decides the same order; only
-- after the window closed (by Redis's clock, the one purchase.lua uses, so
-- no ticket can come after), and only when the caller saw every ticket.
-- Replies: {"OPEN", windowEndMs}  the window is still open: nothing done
--          {"STALE", tickets}     the caller's list is not every ticket
--          {"ORDERED", n}         the order is recorded (now or before)
--          {"NONE"}               not a lottery sale (or not loaded)

local meta_key, tickets_key, order_key = KEYS[1], KEYS[2], KEYS[3]
local window_end = tonumber(redis.call('HGET', meta_key, 'windowEndMs'))
if not window_end then
  return {'NONE'}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now < window_end then
  return {'OPEN', tostring(window_end)}
end
local have = redis.call('LLEN', order_key)
local progress = redis.call('HMGET', meta_key, 'drawPos', 'drawDone')
if progress[2] == '1' or (have > 0 and progress[1]) then
  return {'ORDERED', tostring(have)}
end
if have > 0 then
  -- An order without its position in meta outlived the meta it was
  -- recorded with (the sale was rebuilt since): it is not this meta's
  -- draw, and draw_chunk.lua would find no position to decide from.
  -- Recorded again from the tickets there are (a ticket decided before
  -- keeps its result: draw_chunk.lua skips it).
  redis.call('DEL', order_key)
end
local tickets = redis.call('HLEN', tickets_key)
if tickets ~= #ARGV then
  return {'STALE', tostring(tickets)}
end
for i = 1, #ARGV do
  if redis.call('HEXISTS', tickets_key, ARGV[i]) == 0 then
    return {'STALE', tostring(tickets)}
  end
end
if #ARGV == 0 then
  -- Nobody drew: purchases are first come, first served from now on.
  redis.call('HSET', meta_key, 'drawPos', '0', 'drawDone', '1')
  return {'ORDERED', '0'}
end
-- unpack has a limit on arguments: push in slices.
local i = 1
while i <= #ARGV do
  local last = math.min(i + 999, #ARGV)
  redis.call('RPUSH', order_key, unpack(ARGV, i, last))
  i = last + 1
end
redis.call('HSET', meta_key, 'drawPos', '0')
local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
if expire_at then
  redis.call('PEXPIREAT', order_key, expire_at)
end
return {'ORDERED', tostring(#ARGV)}
