-- ratelimit.lua: two token buckets, one per buyer and one per source IP,
-- checked together before the purchase script. A request passes only if
-- both buckets have a token; only then is one taken from each.
--
-- KEYS[1] sale:{S}:ratelimit   hash  "u:<user>" / "ip:<ip>" -> "tokens:lastMs"
-- KEYS[2] sale:{S}:meta        hash  optional per-sale overrides:
--                                    rlUserRate, rlUserBurst, rlIpRate, rlIpBurst
-- ARGV[1] user field  ARGV[2] ip field ("" when unknown)
-- ARGV[3..6] defaults: user rate/s, user burst, ip rate/s, ip burst
--
-- Reply: {1, 0} allowed, or {0, retryAfterMs}.
-- Rates and bursts are numbers (tonumber), never compared as strings.

local rl_key, meta_key = KEYS[1], KEYS[2]
-- No buckets for a sale Redis does not hold: junk sale ids must not create
-- keys (the purchase script answers them), and a lost sale fails closed there.
if redis.call('EXISTS', meta_key) == 0 then
  return {1, 0}
end
local o = redis.call('HMGET', meta_key, 'rlUserRate', 'rlUserBurst', 'rlIpRate', 'rlIpBurst')
local user_rate = tonumber(o[1]) or tonumber(ARGV[3])
local user_burst = tonumber(o[2]) or tonumber(ARGV[4])
local ip_rate = tonumber(o[3]) or tonumber(ARGV[5])
local ip_burst = tonumber(o[4]) or tonumber(ARGV[6])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Tokens in a bucket now, after refilling since its last use.
local function level(field, rate, burst)
  local raw = redis.call('HGET', rl_key, field)
  if not raw then
    return burst
  end
  local sep = string.find(raw, ':', 1, true)
  local tokens = tonumber(string.sub(raw, 1, sep - 1)) or burst
  local last = tonumber(string.sub(raw, sep + 1)) or now
  return math.min(burst, tokens + math.max(0, now - last) * rate / 1000)
end

local buckets = {{ARGV[1], user_rate, user_burst}}
if ARGV[2] ~= '' then
  buckets[2] = {ARGV[2], ip_rate, ip_burst}
end
local wait = 0
local levels = {}
for i, b in ipairs(buckets) do
  levels[i] = level(b[1], b[2], b[3])
  if levels[i] < 1 then
    wait = math.max(wait, math.ceil((1 - levels[i]) * 1000 / b[2]))
  end
end
if wait > 0 then
  return {0, wait}
end
for i, b in ipairs(buckets) do
  redis.call('HSET', rl_key, b[1], tostring(levels[i] - 1) .. ':' .. now)
end
-- A short sliding expiry: an idle buyer's bucket is full again anyway.
redis.call('PEXPIRE', rl_key, 600000)
return {1, 0}
