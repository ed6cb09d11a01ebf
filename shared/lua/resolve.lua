-- resolve.lua: record what became of a reservation once its order is
-- decided in DynamoDB (the ledger).
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders).
-- ARGV[1] orderId   ARGV[2] mode:
--   WRITTEN         the order row exists; the reservation stays as the record
--                   that lets reconciliation tell written, in flight and
--                   orphaned apart (and answers an Idempotency-Key retry).
--   REJECTED        DynamoDB had no units for it. The buyer holds nothing, so
--                   their count goes down; the stock is NOT returned: Redis
--                   over-counted it to begin with.
--   REJECTED_LIMIT  the buyer's ledger record was at the limit: Redis had
--                   lost count of an order of theirs (a failover that lost
--                   writes lost its deduction too). This reservation's units
--                   and count stand in for the lost one's: both stay.
--   ABANDONED       reconcile gave it up: DynamoDB never took its units, so
--                   they go back (capped at the total) and the count goes
--                   down. ARGV[3] (optional) is how many of them the ledger
--                   offered to the waitlist in the give-up's transaction:
--                   those are other buyers' orders now and stay out.
--
-- Only a QUEUED reservation moves: a decided one (WRITTEN, REJECTED, EXPIRED)
-- never changes again, so a redelivery after an expiry or a give-up cannot
-- undo what the ledger decided, and every mode is safe to run twice.
--
-- Replies: {"OK"} {"SAME"} {"NOT_FOUND"}
--
-- Runs with holdings.lua prepended (see adapters/redis/scripts.rs) for drop_holding().
-- Every change bumps meta `epoch` (reconcile's chunked read; see snapshot_head.lua).

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, mode = ARGV[1], ARGV[2]
if mode ~= 'WRITTEN' and mode ~= 'REJECTED' and mode ~= 'REJECTED_LIMIT'
    and mode ~= 'ABANDONED' then
  return redis.error_reply('ERR mode must be WRITTEN, REJECTED, REJECTED_LIMIT or ABANDONED')
end

local raw = redis.call('HGET', resv_key, order_id)
if not raw then
  return {'NOT_FOUND'}
end
local resv = cjson.decode(raw)
if resv.state ~= 'QUEUED' then
  return {'SAME'}
end

local qty = tonumber(resv.quantity) or 0
if mode == 'REJECTED' or mode == 'ABANDONED' then
  drop_holding(buyers_key, uorders_key, tostring(resv.userId), qty, order_id)
end
if mode == 'ABANDONED' then
  local total = tonumber(redis.call('HGET', meta_key, 'total'))
  local stock = tonumber(redis.call('GET', stock_key))
  local back = math.max(qty - (tonumber(ARGV[3] or '') or 0), 0)
  if total and stock then
    redis.call('SET', stock_key, math.min(stock + back, total), 'KEEPTTL')
  end
end

if mode == 'WRITTEN' then
  resv.state = 'WRITTEN'
else
  resv.state = 'REJECTED'
end
redis.call('HSET', resv_key, order_id, cjson.encode(resv))
if redis.call('EXISTS', meta_key) == 1 then
  redis.call('HINCRBY', meta_key, 'epoch', 1)
end
return {'OK'}
