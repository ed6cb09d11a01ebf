-- rebuild_stage.lua: one page of the ledger's orders, staged for a rebuild
-- of a key group (rebuild.lua renames the staged keys into place at once).
--
-- A rebuild from one script call per group held Redis for as long as the
-- whole sale took to write, and its caller held every order in memory; the
-- ledger is now read and staged a page at a time.
--
-- KEYS[1] buyers  KEYS[2] userorders  KEYS[3] resv  KEYS[4] keyed
-- (each the group's key with ':rebuild:<token>' after it: under the
-- group's hash tag, and this rebuild's own, so two rebuilds never add into
-- each other's keys)
-- ARGV[1]: milliseconds the staged keys live (a rebuild that dies leaves
--          nothing for long)
-- ARGV[2]: the sale's total (sizes the keyed filter, as keyed_mark does)
-- then 4-tuples: orderId, reservation JSON ("" when the order was made on
--          another group), userId, units it holds for its buyer here ("0"
--          when it holds none, or its buyer's home is another group)
--
-- Idempotent: a page sent again (after a lost answer) stages nothing twice:
-- a reservation is set only if absent, and a buyer's units are added only
-- for an order not yet in their staged list.
-- Reply: the number of orders this call staged.

local buyers_key, uorders_key, resv_key, keyed_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ttl = tonumber(ARGV[1])
local staged = 0
local i = 3
while ARGV[i] do
  local order_id, resv, user, units = ARGV[i], ARGV[i + 1], ARGV[i + 2], tonumber(ARGV[i + 3])
  local new = false
  if resv ~= '' and redis.call('HSETNX', resv_key, order_id, resv) == 1 then
    new = true
    if string.sub(order_id, 1, 1) == 'k' then
      keyed_create(keyed_key, ARGV[2])
      keyed_mark(keyed_key, '', order_id)
    end
  end
  if units and units > 0 then
    local ids = redis.call('HGET', uorders_key, user)
    if not ids then
      redis.call('HSET', uorders_key, user, order_id)
      redis.call('HINCRBY', buyers_key, user, units)
      new = true
    elseif not string.find(',' .. ids .. ',', ',' .. order_id .. ',', 1, true) then
      redis.call('HSET', uorders_key, user, ids .. ',' .. order_id)
      redis.call('HINCRBY', buyers_key, user, units)
      new = true
    end
  end
  if new then
    staged = staged + 1
  end
  i = i + 4
end
for _, key in ipairs({buyers_key, uorders_key, resv_key, keyed_key}) do
  if redis.call('EXISTS', key) == 1 then
    redis.call('PEXPIRE', key, ttl)
  end
end
return staged
