-- rebuild.lua: load a sale into Redis from the source of truth, once.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] buyers  KEYS[4] userorders
-- ARGV[1..8]: total, startMs, endMs, perUserLimit, shards, status, version,
--             expireAtMs
-- ARGV[9]:    stock (the sale item's `available`: total minus units held by
--             PENDING_PAYMENT and PAID orders)
-- ARGV[10]:   gate (1 or 0)
-- ARGV[11]:   "1" for a sharded sale's directory keys (meta only), else ""
-- ARGV[12..]: triples userId, units held, comma-separated orderIds; for a
--             directory, ARGV[12] is its home table ("" for the uniform hash)
--
-- Only when the sale is absent: live stock is never overwritten (that would
-- sell it twice), so concurrent runs load it exactly once.
-- Replies: {"LOADED"} or {"EXISTS"}; a directory's end with the home table
-- it holds (an existing one keeps its own).

local meta_key, stock_key, buyers_key, uorders_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
if redis.call('EXISTS', meta_key) == 1 or redis.call('EXISTS', stock_key) == 1 then
  if ARGV[11] == '1' then
    return {'EXISTS', redis.call('HGET', meta_key, 'homes') or ''}
  end
  return {'EXISTS'}
end
local expire_at = ARGV[8]
redis.call('HSET', meta_key, 'total', ARGV[1], 'startMs', ARGV[2], 'endMs', ARGV[3],
  'perUserLimit', ARGV[4], 'shards', ARGV[5], 'status', ARGV[6], 'version', ARGV[7],
  'expireAtMs', expire_at, 'gate', ARGV[10])
if ARGV[11] == '1' then
  redis.call('HSET', meta_key, 'directory', '1', 'homes', ARGV[12] or '')
  redis.call('PEXPIREAT', meta_key, expire_at)
  return {'LOADED', ARGV[12] or ''}
end
redis.call('SET', stock_key, tonumber(ARGV[9]))
redis.call('DEL', buyers_key, uorders_key)
local i = 12
while ARGV[i] do
  redis.call('HSET', buyers_key, ARGV[i], tonumber(ARGV[i + 1]))
  if ARGV[i + 2] ~= '' then
    redis.call('HSET', uorders_key, ARGV[i], ARGV[i + 2])
  end
  i = i + 3
end
for _, key in ipairs({meta_key, stock_key, buyers_key, uorders_key}) do
  redis.call('PEXPIREAT', key, expire_at)
end
return {'LOADED'}
