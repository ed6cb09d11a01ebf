-- waitlist_admit.lua: may this buyer join the sale's waitlist? The same
-- checks as a purchase, in the same order, but for stock: a join is for a
-- sale with none left (on a sharded sale, none on the buyer's home shard).
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3] buyers  KEYS[4] userorders
-- KEYS[5] gateused  KEYS[6] ratelimit  KEYS[7] tickets
-- ARGV[1] userId  ARGV[2] the nonce of a verified gate pass, or ""
-- ARGV[3] when that pass was issued (ms), or ""
-- ARGV[4] source address ("" when unknown)
-- ARGV[5] user rate/s  ARGV[6] user burst  ARGV[7] ip rate/s  ARGV[8] ip
--         burst: the limiter's defaults (ratelimit.lua, prepended)
--
-- A pass that admits a join is used up, as a purchase uses it: a script
-- cannot join with one pass for many accounts. The join itself (the
-- entry) is the ledger's: nothing else is written here.
--
-- Replies: {"OK", nowMs} {"MISSING"} {"SHARDED", n, homes} {"PAUSED"}
--   {"NOT_STARTED", startMs} {"ENDED"} {"DRAWING"} {"AVAILABLE", stock}
--   {"GATE"} {"LIMIT", "o1,o2"} {"RATE_LIMITED", retryAfterMs}

local meta_key, stock_key, buyers_key, uorders_key, gate_key, rl_key, tickets_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local user, nonce = ARGV[1], ARGV[2] or ''

local m = redis.call('HMGET', meta_key, 'startMs', 'endMs', 'perUserLimit', 'status',
  'directory', 'gate', 'windowEndMs', 'drawDone')
if m[5] == '1' then
  local d = redis.call('HMGET', meta_key, 'shards', 'homes')
  return {'SHARDED', d[1], d[2] or ''}
end
local start_ms, end_ms, limit = tonumber(m[1]), tonumber(m[2]), tonumber(m[3])
local stock = tonumber(redis.call('GET', stock_key))
if not start_ms or not end_ms or not limit or not stock then
  return {'MISSING'}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now >= end_ms then
  return {'ENDED'}
end
if m[4] == 'PAUSED' or m[4] == 'LOADING' then
  return {'PAUSED'}
end
if now < start_ms then
  return {'NOT_STARTED', m[1]}
end
local window_end = tonumber(m[7])
if window_end and m[8] ~= '1' then
  -- Tickets are drawn first: a lost ticket may join once the draw is done.
  return {'DRAWING'}
end
if stock >= 1 then
  return {'AVAILABLE', tostring(stock)}
end

local gated = m[6] == '1'
if gated then
  local issued = tonumber(ARGV[3] or '')
  local loaded = tonumber(redis.call('HGET', meta_key, 'loadedAtMs'))
  if nonce == '' or redis.call('HEXISTS', gate_key, nonce) == 1
      or (loaded and (not issued or issued < loaded)) then
    return {'GATE'}
  end
end

local held = tonumber(redis.call('HGET', buyers_key, user)) or 0
if held + 1 > limit then
  return {'LIMIT', redis.call('HGET', uorders_key, user) or ''}
end

local ip_field = ''
if ARGV[4] and ARGV[4] ~= '' then
  ip_field = 'ip:' .. ARGV[4]
end
local allowed, wait = rate_limit(rl_key, meta_key, 'u:' .. user, ip_field,
  ARGV[5], ARGV[6], ARGV[7], ARGV[8], now)
if not allowed then
  return {'RATE_LIMITED', tostring(wait)}
end

if gated then
  redis.call('HSET', gate_key, nonce, tostring(now))
  local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
  if expire_at then
    redis.call('PEXPIREAT', gate_key, expire_at)
  end
end
return {'OK', tostring(now)}
