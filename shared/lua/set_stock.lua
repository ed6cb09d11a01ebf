-- set_stock.lua: set a sale's stock in Redis to what the ledger says is
-- left for it (reconcile's repair after a failover that lost deductions, or
-- units left stuck), only if the stock is still the one reconcile read: a
-- purchase or a return made since then is never erased. Never above the
-- total.
-- KEYS[1] meta  KEYS[2] stock  ARGV[1] the stock reconcile read
-- ARGV[2] the stock the ledger proves
-- ARGV[3] the ledger position that figure is at: the sale item's
--         `returnSeq` read with `available`. Every expiry up to it is in
--         the stock set here, so meta stockSeq records it and
--         return_units.lua gives no stock back for those (only the buyer's
--         count): the index that tells which expiries Redis still owes may
--         lag the consistent read of `available`.
-- Reply: the stock now, or "MISSING".
-- Every change bumps meta `epoch` (reconcile's chunked read; see snapshot_head.lua).
local total = tonumber(redis.call('HGET', KEYS[1], 'total'))
local now = tonumber(redis.call('GET', KEYS[2]))
if not total or not now then
  return 'MISSING'
end
local want = math.min(tonumber(ARGV[2]), total)
if now ~= tonumber(ARGV[1]) or want < 0 then
  return tostring(now)
end
redis.call('SET', KEYS[2], want, 'KEEPTTL')
local seq = tonumber(ARGV[3] or '')
local had = tonumber(redis.call('HGET', KEYS[1], 'stockSeq'))
if seq and (not had or seq > had) then
  redis.call('HSET', KEYS[1], 'stockSeq', seq)
end
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
return tostring(want)
