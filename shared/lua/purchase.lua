-- purchase.lua: the whole purchase decision, atomically.
--
-- KEYS[1] sale:{S}:meta        hash  total, startMs, endMs, perUserLimit, shards,
--                                    status, version, expireAtMs, ledgerSeq,
--                                    soldOutAtMs (set here, once)
-- KEYS[2] sale:{S}:stock       int   units left
-- KEYS[3] sale:{S}:buyers      hash  userId -> units held
-- KEYS[4] sale:{S}:resv        hash  orderId -> reservation JSON
-- KEYS[5] sale:{S}:userorders  hash  userId -> comma-separated orderIds
-- KEYS[6] sale:{S}:gateused    hash  pass nonce -> time used (gated sales)
-- ARGV[1] saleId   ARGV[2] userId   ARGV[3] quantity   ARGV[4] Idempotency-Key or ""
--         The userId is the token's `sub` as issued (any 1 to 255 bytes
--         without control characters: `{`, `,`, `|`, `:` included). It is
--         only ever a hash field, a JSON string (cjson escapes it) or hash
--         input below, never part of a key name or of a list value.
-- ARGV[5] the nonce of a verified gate pass, or "" (checked only when meta
--         says gate = 1; the signature and expiry were checked before)
-- ARGV[11] the order id suffix: "" for a sale of one shard, "-k" for shard k
--         (so an order id names the shard its reservation lives in)
-- ARGV[12] the request id: 31 characters the caller draws at random once
--         per purchase. Without an Idempotency-Key the order id is made of
--         it, so ids never repeat (not across rebuilds, not after a failover
--         that rolled writes back), and a run of the same call again (a
--         client that resent it after a dropped connection) finds its own
--         reservation and answers REPLAY instead of reserving twice.
-- ARGV[13] when the gate pass of ARGV[5] was issued (ms), or "": a pass
--         issued before meta loadedAtMs (the keys' load from the ledger)
--         is refused, since which passes bought before is not rebuilt
-- With shards, every key above is the shard's own (`{S:k}`): a buyer always
-- buys on their home shard, so their count and limit live in one place.
-- KEYS[7] sale:{S}:ratelimit and ARGV[6..10] source address ("" when
--         unknown), user rate/s, user burst, ip rate/s, ip burst: the limiter
--         (ratelimit.lua, prepended), checked last: only a call that
--         passed every refusal (and so may take stock) reads or writes a
--         bucket. Without KEYS[7] there is no limit.
-- KEYS[8] sale:{S}:keyed       string the filter of Idempotency-Key
--                                    reservations (keyed.lua, prepended):
--                                    a reservation under a key marks it
-- KEYS[9] sale:{S}:tickets     hash  userId -> ticket JSON {q, at}: a
--                                    lottery window's tickets
--
-- A sale with a lottery window (meta windowEndMs): from the start until
-- windowEndMs a purchase that passes the pause, the gate, the buyer's limit
-- and the limiter takes no stock and records a ticket, one per buyer (a
-- second purchase answers the same ticket); the draw (draw_chunk.lua)
-- decides the tickets after the window; until it is done, purchases are
-- answered DRAWING, then first come, first served as without a window.
-- The order of the checks is the cost of a refusal: the replay, a pause
-- and a sell-out are decided from meta, stock and one HGET, before the
-- clock (a replay that will send its order again pays the limiter first); then the window, the gate and the buyer's limit, all reads; the
-- limiter and every write only for a call that will take stock.
--
-- Replies (all strings, first element is the outcome):
--   {"OK", orderId, atMs, stockLeft}       reserved now
--   {"REPLAY", orderId, reservationJson}   same Idempotency-Key seen before
--   {"REPLAY", orderId, reservationJson, "SEND"}  the same, its order not
--                   written yet: the caller sends its message again before
--                   answering (the limiter's buckets paid for the send)
--   {"MISSING"} {"PAUSED"} {"NOT_STARTED", startMs} {"ENDED"} {"GATE"}
--   {"SHARDED", n, homes}  these are a sharded sale's directory keys (n shards,
--                   homes the home table or ""): nothing done
--   {"RATE_LIMITED", retryAfterMs}
--   {"TICKET", ticketJson, windowEndMs}  a lottery window's ticket, new or
--                   the buyer's own, and when the draw is due
--   {"DRAWING"}  the window has closed and the draw is not done yet
-- When the limiter failed open, the reply (OK) is prefixed with "LF".
--   {"LIMIT", "o1,o2"}  {"SOLD_OUT", stockLeft}
--
-- Every number read from Redis goes through tonumber(): Redis stores strings,
-- and "10" < "9" as strings.

local meta_key, stock_key, buyers_key, resv_key, uorders_key, gate_key =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local sale, user, idem, nonce = ARGV[1], ARGV[2], ARGV[4], ARGV[5] or ''
local id_suffix = ARGV[11] or ''
local qty = tonumber(ARGV[3])
if not qty or qty < 1 then
  return redis.error_reply('ERR quantity must be a positive integer')
end

-- Only the fields a refusal needs: each one read is work on every call.
local m = redis.call('HMGET', meta_key, 'startMs', 'endMs', 'perUserLimit', 'status',
  'directory', 'gate', 'windowEndMs', 'drawDone')
if m[5] == '1' then
  -- The directory of a sharded sale: the caller learns the shard count and
  -- home table once and buys on the buyer's home shard from then on.
  local d = redis.call('HMGET', meta_key, 'shards', 'homes')
  return {'SHARDED', d[1], d[2] or ''}
end
local start_ms, end_ms, limit = tonumber(m[1]), tonumber(m[2]), tonumber(m[3])
local stock = tonumber(redis.call('GET', stock_key))
if not start_ms or not end_ms or not limit or not stock then
  -- Unknown sale, not loaded yet, or keys lost: the caller decides which,
  -- and never falls back to selling without Redis.
  return {'MISSING'}
end

-- The buyer's and the address's token buckets (ratelimit.lua, prepended),
-- at `now` (read here when not given): allowed, the wait in ms, and whether
-- the limiter failed (it then lets the call through). Without KEYS[7]
-- there is no limit.
local function take_token(now)
  if not KEYS[7] then
    return true, 0, false
  end
  if not now then
    local lt = redis.call('TIME')
    now = tonumber(lt[1]) * 1000 + math.floor(tonumber(lt[2]) / 1000)
  end
  local ip_field = ''
  if ARGV[6] and ARGV[6] ~= '' then
    ip_field = 'ip:' .. ARGV[6]
  end
  -- Fields of one hash, not keys: a `{` in the user id cannot move a key
  -- to another slot. "u:" and "ip:" keep a buyer's bucket apart from an
  -- address's whatever the user id holds (a sub of "ip:1.2.3.4" is the
  -- field "u:ip:1.2.3.4").
  return rate_limit(KEYS[7], meta_key, 'u:' .. user, ip_field,
    ARGV[7], ARGV[8], ARGV[9], ARGV[10], now)
end

-- A retry with the same key (or the same call run again) gets its first
-- answer, even after sell-out.
local order_id
if idem ~= '' then
  -- The user id is the provider's `sub` and may hold `|`; the input still
  -- names one (sale, user, key): neither a sale id nor a key can hold `|`,
  -- so the first one ends the sale and the last one starts the key.
  order_id = 'k' .. string.sub(redis.sha1hex(sale .. '|' .. user .. '|' .. idem), 1, 31) .. id_suffix
else
  local request = ARGV[12] or ''
  if string.len(request) ~= 31 then
    return redis.error_reply('ERR request id must be 31 characters')
  end
  order_id = 'n' .. request .. id_suffix
end
local existing = redis.call('HGET', resv_key, order_id)
if existing then
  if idem ~= '' then
    local resv = cjson.decode(existing)
    if resv.state == 'QUEUED' then
      -- Whether anything sent its message is unknown here: the first
      -- request's answer may have been lost before it sent (a timeout, and
      -- its buyer was told 503), and then a 202 would rest on Redis alone
      -- until reconcile's relay. So the caller sends it again (the writer
      -- writes an order once). A send costs what a purchase's does, and
      -- the buyer's and the address's buckets pay for it as for one: a
      -- client repeating one key cannot flood the queue.
      local allowed, wait = take_token()
      if not allowed then
        return {'RATE_LIMITED', tostring(wait)}
      end
      if not resv.replayed then
        -- This retry is answered 202 while the first request may still be
        -- sending: if that send is refused, its release must not take back
        -- what this answer promised (release.lua refuses a replayed
        -- reservation; reconcile relays it).
        resv.replayed = 1
        existing = cjson.encode(resv)
        redis.call('HSET', resv_key, order_id, existing)
      end
      return {'REPLAY', order_id, existing, 'SEND'}
    end
  end
  return {'REPLAY', order_id, existing}
end

-- LOADING: closed by a load until prewarm has read the table again.
if m[4] == 'PAUSED' or m[4] == 'LOADING' then
  -- An end is obeyed over a pause (an ended sale is never resumed): the
  -- clock is read here only for a paused sale.
  local pt = redis.call('TIME')
  if tonumber(pt[1]) * 1000 + math.floor(tonumber(pt[2]) / 1000) >= end_ms then
    return {'ENDED'}
  end
  return {'PAUSED'}
end

-- Sold out before the clock, the gate and the limit: after a sell-out
-- every buyer gets the same answer (an ended or gated sale included,
-- holders too), whether it comes from here or from an environment's
-- in-memory sold-out flag (a holder finds their order with
-- GET /sales/{saleId}/orders). This is the path nearly every call of a
-- flash sale takes: three reads (meta, stock, the replay check), no write.
if stock < qty then
  return {'SOLD_OUT', tostring(stock)}
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

if now < start_ms then
  return {'NOT_STARTED', m[1]}
end
if now >= end_ms then
  return {'ENDED'}
end

-- A lottery window: the buyer's ticket, if they have one, is the answer
-- (before the gate: their pass was used for it).
-- After the window, nobody takes stock ahead of the tickets: DRAWING until
-- the draw is done (draw_chunk.lua sets drawDone).
local window_end = tonumber(m[7])
local tickets_key = KEYS[9]
local in_window = false
if window_end and tickets_key and m[8] ~= '1' then
  if now >= window_end then
    return {'DRAWING'}
  end
  local ticket = redis.call('HGET', tickets_key, user)
  if ticket then
    return {'TICKET', ticket, m[7]}
  end
  in_window = true
end

-- A gated sale sells only to a verified pass, and each pass buys once.
-- Which passes bought is known to Redis alone (gateused): keys rebuilt
-- from the ledger (meta loadedAtMs) do not know them, so a pass issued
-- before they were loaded is refused too (the buyer answers again).
local gated = m[6] == '1'
if gated then
  local issued = tonumber(ARGV[13] or '')
  local loaded = tonumber(redis.call('HGET', meta_key, 'loadedAtMs'))
  if nonce == '' or redis.call('HEXISTS', gate_key, nonce) == 1
      or (loaded and (not issued or issued < loaded)) then
    return {'GATE'}
  end
end

local held = tonumber(redis.call('HGET', buyers_key, user)) or 0
if held + qty > limit then
  return {'LIMIT', redis.call('HGET', uorders_key, user) or ''}
end

-- The rate limiter last, for calls that may take stock: every refusal
-- above is answered with reads only, so a flood after sell-out (or of
-- buyers at their limit) costs Redis no write and gets the real reason,
-- not 429. A sale Redis does not hold has no buckets (junk ids create no
-- keys). The limiter's failure lets the purchase through, flagged.
local lf = nil
local allowed, wait, failed = take_token(now)
if failed then
  lf = 'LF'
elseif not allowed then
  return {'RATE_LIMITED', tostring(wait)}
end
local function reply(r)
  if lf then
    table.insert(r, 1, lf)
  end
  return r
end

if in_window then
  -- No stock, no reservation: the draw decides. The ticket keeps the
  -- quantity asked for and the time (for the record; the draw's order is
  -- the seed's, not the arrival's).
  local ticket = cjson.encode({ q = qty, at = tostring(now) })
  redis.call('HSET', tickets_key, user, ticket)
  if gated then
    redis.call('HSET', gate_key, nonce, tostring(now))
  end
  local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
  if expire_at then
    redis.call('PEXPIREAT', tickets_key, expire_at)
    if gated then
      redis.call('PEXPIREAT', gate_key, expire_at)
    end
  end
  return reply({'TICKET', ticket, m[7]})
end

-- reserve.lua (prepended): stock, sell-out moment, buyer count,
-- reservation, the buyer's list.
local left = reserve(meta_key, stock_key, buyers_key, resv_key, uorders_key,
  user, qty, order_id, now)

if gated then
  redis.call('HSET', gate_key, nonce, tostring(now))
end
if idem ~= '' and KEYS[8] then
  keyed_mark(KEYS[8], meta_key, order_id)
end

-- Hashes created by a first purchase get the sale's expiry too.
local expire_at = tonumber(redis.call('HGET', meta_key, 'expireAtMs'))
if expire_at then
  redis.call('PEXPIREAT', buyers_key, expire_at)
  redis.call('PEXPIREAT', resv_key, expire_at)
  redis.call('PEXPIREAT', uorders_key, expire_at)
  if gated then
    redis.call('PEXPIREAT', gate_key, expire_at)
  end
  if idem ~= '' and KEYS[8] then
    redis.call('PEXPIREAT', KEYS[8], expire_at)
  end
end

return reply({'OK', order_id, tostring(now), tostring(left)})
