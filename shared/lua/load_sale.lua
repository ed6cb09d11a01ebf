-- load_sale.lua: put a sale into Redis, once.
--
-- KEYS[1] meta  KEYS[2] stock  KEYS[3..] the sale's other keys (buyers,
-- resv, userorders, gateused, keyed, outcomes), whose expiry follows the sale's
-- end too; a sharded sale's directory passes meta and outcomes only
-- ARGV: total, startMs, endMs, perUserLimit, shards, status, version, expireAtMs,
--       gate (1 or 0), and optionally ARGV[10]: this key group's initial
--       stock (a shard's share; the total when absent), ARGV[11]: "1" when
--       these are a sharded sale's directory keys (meta only, no stock),
--       ARGV[12]: the directory's home table ("" for the uniform hash),
--       written only when the directory is created: buyers' counts live
--       on their home shards, so homes never move while the sale lives;
--       ARGV[13], ARGV[14]: a one-shard sale's lottery window, its end
--       (windowEndMs) and the draw's seed (hex), or both "" for none
--       (ARGV[10..12] are then "", "0", "": the whole sale)
--
-- If the sale is already loaded, its stock is never overwritten (that would
-- sell it twice); only the window, limit, status and expiry are refreshed,
-- so a changed endAt extends the keys, and an edited total moves the stock
-- by the difference.
--
-- A load never opens a sale: the sale it is given may have been read before
-- an operator's pause, whose own Redis step found no keys yet (a rebuild)
-- or came before this write. A paused sale given is written LOADING (closed,
-- and openable only by set_status.lua's OPEN, which prewarm sends after
-- reading the table again); a live sale given leaves a loaded group's
-- status as it is, and only a new group is made LIVE.
-- Replies: {"LOADED"} or {"REFRESHED", stockNow}; a directory's replies end
-- with the home table it holds.

local meta_key, stock_key = KEYS[1], KEYS[2]
local total, start_ms, end_ms, limit, shards, status, version, expire_at, gate =
  ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9] or '0'

-- A share of the stock is given for a shard only; "" means none.
local share = ARGV[10]
if share == '' then
  share = nil
end
local initial = share or total
local directory = ARGV[11] == '1'
-- ARGV[15] "1": a refresh only (prewarm of a sale it found loaded). A group
-- that lost its keys since is rebuilt from the ledger, never made here with
-- the whole stock.
if ARGV[15] == '1' and redis.call('EXISTS', meta_key) == 0 then
  return {'MISSING'}
end
-- ARGV[16] (a refresh): the version of the sale item the sale was read at.
-- A refresh read before one that already reached Redis writes nothing, so
-- an end or an edit it did not see is never put back.
local def_version = tonumber(ARGV[16] or '')
if def_version then
  local held = tonumber(redis.call('HGET', meta_key, 'defVersion') or '')
  if held and def_version < held then
    return {'STALE'}
  end
  redis.call('HSET', meta_key, 'defVersion', def_version)
end
-- What a load writes as the status (see above): LOADING for a paused sale;
-- for a live one, LIVE on a new group, else what the group holds.
local current = redis.call('HGET', meta_key, 'status')
if status ~= 'LIVE' then
  if current == 'PAUSED' then
    status = 'PAUSED'
  else
    status = 'LOADING'
  end
elseif current then
  status = current
end
if directory then
  -- The directory of a sharded sale: meta only, so readers find the shards.
  local fresh = redis.call('EXISTS', meta_key) == 0
  redis.call('HSET', meta_key, 'total', total, 'shards', shards, 'directory', '1',
    'startMs', start_ms, 'endMs', end_ms, 'perUserLimit', limit, 'status', status,
    'expireAtMs', expire_at, 'gate', gate)
  if fresh then
    redis.call('HSET', meta_key, 'version', version, 'homes', ARGV[12] or '')
  end
  -- Meta, and the directory's other keys (the outcome tally) if any.
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIREAT', key, expire_at)
  end
  local homes = redis.call('HGET', meta_key, 'homes') or ''
  if fresh then
    return {'LOADED', homes}
  end
  return {'REFRESHED', '0', homes}
end

local stock = redis.call('GET', stock_key)
local fields = {'startMs', start_ms, 'endMs', end_ms, 'perUserLimit', limit,
  'status', status, 'expireAtMs', expire_at, 'gate', gate}
-- The lottery window: purchase.lua hands out tickets until windowEndMs.
-- The catalog never changes it (nor the seed) after the start.
local window_end, seed = ARGV[13] or '', ARGV[14] or ''
if window_end ~= '' then
  if not tonumber(window_end) or string.len(seed) ~= 64 then
    return redis.error_reply('ERR a lottery window needs its end (ms) and a 64-digit seed')
  end
  table.insert(fields, 'windowEndMs')
  table.insert(fields, window_end)
  table.insert(fields, 'drawSeed')
  table.insert(fields, seed)
end

if stock and redis.call('EXISTS', meta_key) == 1 then
  -- A one-shard sale whose total was edited (allowed before its start):
  -- the stock moves by the same amount, once (the meta's total says
  -- whether it was applied). A shard holds a share, never edited.
  local was = tonumber(redis.call('HGET', meta_key, 'total'))
  if not share and tonumber(shards) <= 1 and was and was ~= tonumber(total) then
    stock = tostring(math.max(0, tonumber(stock) + tonumber(total) - was))
    redis.call('SET', stock_key, stock, 'KEEPTTL')
    -- A change of the stock: see snapshot_head.lua.
    redis.call('HSET', meta_key, 'total', total)
    redis.call('HINCRBY', meta_key, 'epoch', 1)
  end
  redis.call('HSET', meta_key, unpack(fields))
  if window_end == '' then
    -- A window removed before the start.
    redis.call('HDEL', meta_key, 'windowEndMs', 'drawSeed')
  end
  -- A changed endAt moves every key's expiry, not just these two.
  for _, key in ipairs(KEYS) do
    redis.call('PEXPIREAT', key, expire_at)
  end
  return {'REFRESHED', stock}
end

redis.call('DEL', meta_key)
redis.call('HSET', meta_key, 'total', total, 'shards', shards, 'version', version, unpack(fields))
redis.call('SET', stock_key, initial)
redis.call('PEXPIREAT', meta_key, expire_at)
redis.call('PEXPIREAT', stock_key, expire_at)
return {'LOADED'}
