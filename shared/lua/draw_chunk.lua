-- draw_chunk.lua: decide the next tickets of the lottery draw, each
-- exactly as purchase.lua decides a purchase.
-- Runs with reserve.lua prepended (see adapters/redis/scripts.rs) for reserve().
--
-- KEYS[1] sale:{S}:meta        hash  perUserLimit, drawPos, drawDone,
--                                    expireAtMs, soldOutAtMs (set once)
-- KEYS[2] sale:{S}:stock       int   units left
-- KEYS[3] sale:{S}:buyers      hash  userId -> units held
-- KEYS[4] sale:{S}:resv        hash  orderId -> reservation JSON
-- KEYS[5] sale:{S}:userorders  hash  userId -> comma-separated orderIds
-- KEYS[6] sale:{S}:tickets     hash  userId -> ticket JSON {q, at[, r, o]}
-- KEYS[7] sale:{S}:drawq       list  the holders in the draw's order
-- ARGV[1] the position the caller read (meta drawPos): compare-and-set, so
--         racing drawers never decide a ticket twice
-- ARGV[2] how many tickets to decide at most
-- ARGV[3] saleId (the order ids are derived from it and the user id, so
--         a ticket's order id is the same whoever decides it)
--
-- A won ticket takes stock, counts for its buyer and becomes a QUEUED
-- reservation (the outbox reconcile relays from), its ticket marked
-- {"r":"WON","o":orderId}; a ticket that finds too little stock or its
-- buyer at the limit is {"r":"LOST"}. drawPos moves past the chunk, and
-- drawDone = 1 after the last.
-- Replies: {"DECIDED", pos, total, orderId1, userId1, qty1, atMs, ...}
--          {"MOVED", pos}   another drawer got there first: nothing done
--          {"DONE", total}  the draw is over
--          {"NO_ORDER"}     the order is not recorded (draw_order.lua first)
--          {"PAUSED"}       an operator paused the sale: nothing done
--          {"ENDED"}        the sale has ended (endMs): nothing is decided
--                           after the end, as no purchase is

local meta_key, stock_key, buyers_key, resv_key, uorders_key, tickets_key, order_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local m = redis.call('HMGET', meta_key, 'drawPos', 'drawDone', 'perUserLimit', 'status',
  'expireAtMs', 'endMs')
local total = redis.call('LLEN', order_key)
if m[2] == '1' then
  return {'DONE', tostring(total)}
end
local pos, limit = tonumber(m[1]), tonumber(m[3])
if not pos or not limit or total == 0 then
  return {'NO_ORDER'}
end
if pos ~= tonumber(ARGV[1]) then
  return {'MOVED', tostring(pos)}
end
-- The end before the pause: an ended sale is never resumed, so a paused
-- and then ended one must read ENDED, not wait for a resume.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local end_ms = tonumber(m[6])
if end_ms and now >= end_ms then
  return {'ENDED'}
end
if m[4] == 'PAUSED' or m[4] == 'LOADING' then
  return {'PAUSED'}
end
local n = tonumber(ARGV[2]) or 100
local sale = ARGV[3]
local expire_at = tonumber(m[5])

local out = {'DECIDED', '', tostring(total)}
local users = redis.call('LRANGE', order_key, pos, pos + n - 1)
for _, user in ipairs(users) do
  local raw = redis.call('HGET', tickets_key, user)
  local ticket = raw and cjson.decode(raw)
  if ticket and not ticket.r then
    local qty = tonumber(ticket.q) or 0
    local stock = tonumber(redis.call('GET', stock_key)) or 0
    local held = tonumber(redis.call('HGET', buyers_key, user)) or 0
    if qty >= 1 and stock >= qty and held + qty <= limit then
      local order_id = 'n' .. string.sub(redis.sha1hex(sale .. '|draw|' .. user), 1, 31)
      -- reserve.lua (prepended): exactly as purchase.lua reserves.
      reserve(meta_key, stock_key, buyers_key, resv_key, uorders_key, user, qty, order_id, now)
      ticket.r, ticket.o = 'WON', order_id
      table.insert(out, order_id)
      table.insert(out, user)
      table.insert(out, tostring(qty))
      table.insert(out, tostring(now))
    else
      ticket.r = 'LOST'
    end
    redis.call('HSET', tickets_key, user, cjson.encode(ticket))
  end
end
pos = pos + #users
redis.call('HSET', meta_key, 'drawPos', tostring(pos))
if pos >= total then
  redis.call('HSET', meta_key, 'drawDone', '1')
end
if expire_at then
  for _, key in ipairs({buyers_key, resv_key, uorders_key, tickets_key}) do
    if redis.call('EXISTS', key) == 1 then
      redis.call('PEXPIREAT', key, expire_at)
    end
  end
end
out[2] = tostring(pos)
return out
