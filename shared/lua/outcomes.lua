-- outcomes.lua: adds one execution environment's purchase answers of the
-- last second(s) to a sale's tally, for the operator dashboard
-- (GET /admin/sales/{saleId}/live), and to the tally of their 10-second
-- bucket (the dashboard's funnel, kept beyond a page reload).
--
-- KEYS[1] sale:{S}:meta  KEYS[2] sale:{S}:outcomes
-- KEYS[3] sale:{S}:funnel  hash  bucket start (ms) -> {"OUTCOME": n, ...} (JSON)
-- ARGV[1] the bucket's start (ms)  ARGV[2] how many buckets the funnel keeps
-- ARGV[3..]: outcome, count, outcome, count, ... (codes as the Purchases metric)
--
-- Not part of the purchase script: the hot path stays one EVALSHA with no
-- extra writes; each environment sends this at most once a second.
-- Only a sale Redis holds gets a tally (no key for an unknown or unloaded
-- sale), and the tally expires with the sale's keys (meta's expireAtMs).
-- The funnel starts at the bucket holding the sale's start (answers before
-- it are in the tally only) and keeps the latest ARGV[2] buckets: a new
-- bucket beyond them drops the oldest.
-- Replies: 1 when added, 0 when the sale has no keys (nothing written).

local m = redis.call('HMGET', KEYS[1], 'expireAtMs', 'startMs')
local expire_at, start_ms = tonumber(m[1]), tonumber(m[2])
if not expire_at then
  return 0
end
local bucket, keep = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = 3, #ARGV - 1, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIREAT', KEYS[2], expire_at)

if not bucket or not keep or not start_ms or bucket + 10000 <= start_ms then
  return 1
end
local field = ARGV[1]
local raw = redis.call('HGET', KEYS[3], field)
local counts = {}
if raw then
  counts = cjson.decode(raw)
end
for i = 3, #ARGV - 1, 2 do
  counts[ARGV[i]] = (tonumber(counts[ARGV[i]]) or 0) + tonumber(ARGV[i + 1])
end
redis.call('HSET', KEYS[3], field, cjson.encode(counts))
if not raw and redis.call('HLEN', KEYS[3]) > keep then
  -- A new bucket went past the bound: drop the oldest (one field, the
  -- scan of at most keep + 1 names once per bucket, not per flush).
  local oldest, oldest_at = nil, nil
  for _, name in ipairs(redis.call('HKEYS', KEYS[3])) do
    local at = tonumber(name)
    if at and (not oldest_at or at < oldest_at) then
      oldest, oldest_at = name, at
    end
  end
  if oldest then
    redis.call('HDEL', KEYS[3], oldest)
  end
end
redis.call('PEXPIREAT', KEYS[3], expire_at)
return 1
