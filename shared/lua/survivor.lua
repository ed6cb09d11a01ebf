-- survivor.lua: what a rebuild of a sharded sale's lost shards needs of a
-- shard that kept its keys, read in one atomic step: its stock, the orders
-- whose units it has had back (EXPIRED reservations), the reservations it
-- still holds for the queue (QUEUED), and its transfers. Its work grows with
-- the shard's reservations (one pass), but its reply only with the expired
-- and queued ones: the buyers, and the written reservations, stay in Redis.
-- It runs only after a shard was lost.
-- KEYS meta, stock, resv, and for a shard also lent, received.
-- Reply: {"MISSING"} or {"OK", stock, total, expiredIds, queuedFlat
-- [, lentFlat, receivedFlat]}: expiredIds a list of order ids, queuedFlat
-- order id, quantity pairs, the others HGETALL replies.
local total = redis.call('HGET', KEYS[1], 'total')
local stock = redis.call('GET', KEYS[2])
if not total or not stock then
  return {'MISSING'}
end
local expired, queued = {}, {}
local all = redis.call('HGETALL', KEYS[3])
for i = 1, #all, 2 do
  local raw = all[i + 1]
  -- A decided reservation needs no decoding: only a text naming one of
  -- the two states can hold it (the exact test is on the decoded state).
  if string.find(raw, 'EXPIRED', 1, true) or string.find(raw, 'QUEUED', 1, true) then
    local resv = cjson.decode(raw)
    if resv.state == 'EXPIRED' then
      expired[#expired + 1] = all[i]
    elseif resv.state == 'QUEUED' then
      queued[#queued + 1] = all[i]
      queued[#queued + 1] = tostring(resv.quantity)
    end
  end
end
if KEYS[4] then
  return {'OK', stock, total, expired, queued,
    redis.call('HGETALL', KEYS[4]), redis.call('HGETALL', KEYS[5])}
end
return {'OK', stock, total, expired, queued}
