-- rebuild.lua: load a sale into Redis from the ledger (DynamoDB), once.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] buyers  KEYS[4] userorders  KEYS[5] resv
--         KEYS[6] keyed (not for a directory)
--         KEYS[7..10] (a group only): the buyers, userorders, resv and
--         keyed filter rebuild_stage.lua staged for this rebuild; renamed
--         into place when this call loads the group, deleted when the group
--         is there already
-- ARGV[1..8]: total, startMs, endMs, perUserLimit, shards, status, version,
--             expireAtMs
-- ARGV[9]:    stock (this key group's share of the sale item's `available`)
-- ARGV[10]:   gate (1 or 0)
-- ARGV[11]:   "1" for a sharded sale's directory keys (meta only), else
--             "" or, for a sale with a lottery window, "windowEndMs|seed"
--             (see load_sale.lua)
-- For a directory: ARGV[12] is its home table ("" for the uniform hash).
-- Otherwise:
-- ARGV[12]:   ledgerSeq: the sale item's `returnSeq` read with `available`
--             (every expiry up to it is in that stock; see return_units.lua)
--
-- The buyers, their orders and the decided reservations (WRITTEN, EXPIRED,
-- REJECTED: an Idempotency-Key retry replays its order instead of
-- reserving again under the same id, and a return already in the stock is
-- not made twice) come staged, a page at a time, by rebuild_stage.lua.
--
-- Only when the sale is absent: live stock is never overwritten (that would
-- sell it twice), so concurrent runs load it exactly once.
-- Replies: {"LOADED", buyers loaded} or {"EXISTS"}; a directory's are
-- {"LOADED" or "EXISTS", the home table it holds} (an existing one keeps
-- its own).

local meta_key, stock_key, buyers_key, uorders_key, resv_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local staged = {KEYS[7], KEYS[8], KEYS[9], KEYS[10]}
if redis.call('EXISTS', meta_key) == 1 or redis.call('EXISTS', stock_key) == 1 then
  if staged[1] then
    redis.call('DEL', staged[1], staged[2], staged[3], staged[4])
  end
  if ARGV[11] == '1' then
    return {'EXISTS', redis.call('HGET', meta_key, 'homes') or ''}
  end
  return {'EXISTS'}
end
local expire_at = ARGV[8]
-- A paused sale is made LOADING: closed, opened only by set_status.lua's
-- OPEN once prewarm has read the table again (see load_sale.lua).
local status = ARGV[6]
if status ~= 'LIVE' then
  status = 'LOADING'
end
redis.call('HSET', meta_key, 'total', ARGV[1], 'startMs', ARGV[2], 'endMs', ARGV[3],
  'perUserLimit', ARGV[4], 'shards', ARGV[5], 'status', status, 'version', ARGV[7],
  'expireAtMs', expire_at, 'gate', ARGV[10])
if ARGV[11] == '1' then
  redis.call('HSET', meta_key, 'directory', '1', 'homes', ARGV[12] or '')
  redis.call('PEXPIREAT', meta_key, expire_at)
  return {'LOADED', ARGV[12] or ''}
end
-- loadedAtMs: when these keys were made from the ledger. Which gate
-- passes bought (gateused) is not in the ledger: purchase.lua refuses a
-- pass issued before this moment.
local t = redis.call('TIME')
redis.call('HSET', meta_key, 'ledgerSeq', tonumber(ARGV[12]) or 0,
  'loadedAtMs', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
if ARGV[11] ~= '' then
  local window_end, seed = string.match(ARGV[11], '^(%d+)|(%x+)$')
  if not window_end or string.len(seed) ~= 64 then
    return redis.error_reply('ERR a lottery window is "windowEndMs|seed"')
  end
  redis.call('HSET', meta_key, 'windowEndMs', window_end, 'drawSeed', seed)
end
redis.call('SET', stock_key, tonumber(ARGV[9]))
redis.call('DEL', buyers_key, uorders_key, resv_key)
-- The filter holds exactly the reservations staged: a replay of any of
-- them must reach Redis, and one lost with the keys must not.
local keyed_key = KEYS[6]
redis.call('DEL', keyed_key)
for j, live in ipairs({buyers_key, uorders_key, resv_key, keyed_key}) do
  if redis.call('EXISTS', staged[j]) == 1 then
    redis.call('RENAME', staged[j], live)
    redis.call('PERSIST', live)
  end
end
for _, key in ipairs({meta_key, stock_key, buyers_key, uorders_key, resv_key}) do
  redis.call('PEXPIREAT', key, expire_at)
end
if redis.call('EXISTS', keyed_key) == 1 then
  redis.call('PEXPIREAT', keyed_key, expire_at)
end
return {'LOADED', tostring(redis.call('HLEN', buyers_key))}
