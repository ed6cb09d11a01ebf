-- hold_offer.lua: an order the waitlist is offered (a returned unit handed
-- to the head of the line), counted for its buyer's limit once, in steps
-- around the ledger's transaction (ARGV[6] mode):
--
--   CLAIM    before the ledger: the buyer's count goes up by the offer's
--            units if it stays within the sale's perUserLimit, counting
--            what Redis counts and the ledger may not yet (purchases still
--            on the queue), and the offer's entry is written as OFFERING.
--            So the buyer cannot buy past the limit while the offer is
--            being made, and no offer is made past it. {"LIMIT"} when it
--            would not fit.
--   HOLD     after the ledger wrote the offer: its entry becomes WRITTEN
--            (a claim's count stands). Without an entry (no claim: the
--            sale was rebuilt meanwhile, or the claim was lost), counted
--            now, unless a sale loaded from the ledger at or after the
--            handover's position (ARGV[5]) counted the order at load.
--   UNCLAIM  the ledger did not offer it: a claim still OFFERING is taken
--            back (count and entry) once every run that claimed it has
--            given it up. Runs of the release overlap (the job and the
--            orders API, a schedule delivered twice) and claim the same
--            offer, whose id is the buyer's for the sale: the entry keeps
--            how many claims it has, so a run whose transaction failed
--            because another's offered it never takes that one's count.
--
-- KEYS as in purchase.lua (meta, stock, buyers, resv, userorders), of the
-- order's shard (its id names it).
-- ARGV[1] orderId  ARGV[2] userId  ARGV[3] quantity  ARGV[4] atMs
-- ARGV[5] the handover's position in the ledger (the sale item's
--         `returnSeq` it set; "" for a claim)
-- ARGV[6] mode: CLAIM, HOLD or UNCLAIM
--
-- The stock is never touched: the unit goes from one buyer to another.
-- A claim a crash left behind is lowered by reconcile once it is older
-- than the maximum age with no order row (it proves nothing then).
-- Runs with holdings.lua prepended (see adapters/redis/scripts.rs).
-- Replies: {"CLAIMED"} {"LIMIT"} {"HELD"} {"UNCLAIMED"} {"SAME"} {"MISSING"}

local meta_key, stock_key, buyers_key, resv_key, uorders_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local order_id, user, qty, at = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local seq = tonumber(ARGV[5] or '')
local mode = ARGV[6] or 'HOLD'
if mode ~= 'CLAIM' and mode ~= 'HOLD' and mode ~= 'UNCLAIM' then
  return redis.error_reply('ERR mode must be CLAIM, HOLD or UNCLAIM')
end

if not tonumber(redis.call('HGET', meta_key, 'total')) or not redis.call('GET', stock_key) then
  return {'MISSING'}
end
local raw = redis.call('HGET', resv_key, order_id)
local entry = raw and cjson.decode(raw)

local function list(u, id)
  local listed = redis.call('HGET', uorders_key, u)
  if listed and listed ~= '' then
    redis.call('HSET', uorders_key, u, listed .. ',' .. id)
  else
    redis.call('HSET', uorders_key, u, id)
  end
end

local function keep(state, claims)
  redis.call('HSET', resv_key, order_id,
    cjson.encode({userId = user, quantity = qty, atMs = at, state = state, claims = claims}))
  redis.call('HINCRBY', meta_key, 'epoch', 1)
  local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
  if expire_at then
    redis.call('PEXPIREAT', resv_key, expire_at)
    redis.call('PEXPIREAT', buyers_key, expire_at)
    redis.call('PEXPIREAT', uorders_key, expire_at)
  end
end

if mode == 'UNCLAIM' then
  if not entry or entry.state ~= 'OFFERING' then
    return {'SAME'}
  end
  local claims = (tonumber(entry.claims) or 1) - 1
  if claims > 0 then
    at = entry.atMs
    keep('OFFERING', claims)
    return {'SAME'}
  end
  drop_holding(buyers_key, uorders_key, user, qty, order_id)
  redis.call('HDEL', resv_key, order_id)
  redis.call('HINCRBY', meta_key, 'epoch', 1)
  return {'UNCLAIMED'}
end

if mode == 'CLAIM' then
  if entry then
    if entry.state == 'OFFERING' then
      at = entry.atMs
      keep('OFFERING', (tonumber(entry.claims) or 1) + 1)
    end
    return {'SAME'}
  end
  local limit = tonumber(redis.call('HGET', meta_key, 'perUserLimit'))
  local held = tonumber(redis.call('HGET', buyers_key, user)) or 0
  if limit and held + qty > limit then
    return {'LIMIT'}
  end
  redis.call('HINCRBY', buyers_key, user, qty)
  list(user, order_id)
  keep('OFFERING', 1)
  return {'CLAIMED'}
end

-- HOLD
if entry then
  if entry.state ~= 'OFFERING' then
    return {'SAME'}
  end
  keep('WRITTEN')
  return {'HELD'}
end
local ledger = tonumber(redis.call('HGET', meta_key, 'ledgerSeq'))
if not (seq and ledger and seq <= ledger) then
  redis.call('HINCRBY', buyers_key, user, qty)
  list(user, order_id)
end
keep('WRITTEN')
return {'HELD'}
