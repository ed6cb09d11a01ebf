-- ratelimit.lua: two token buckets, one per buyer and one per source
-- address. Prepended to purchase.lua (see adapters/redis/scripts.rs), which calls
-- rate_limit() after every refusal, for calls that may take stock only
-- (and for a keyed retry that will send its order again), so the limit
-- costs no extra round trip and a refused call no write; it
-- stays its own piece of code with its own key on the sale's hash tag.
--
-- rl_key    sale:{S}:ratelimit  hash  "u:<user>" / "ip:<ip>" -> "tokens:lastMs"
-- meta_key  sale:{S}:meta       optional per-sale overrides:
--                               rlUserRate, rlUserBurst, rlIpRate, rlIpBurst
-- user_field, ip_field ("" when unknown), then the defaults: user rate/s,
-- user burst, ip rate/s, ip burst.
--
-- Returns allowed (boolean), retryAfterMs, failed (boolean). Every access to
-- rl_key goes through redis.pcall: if the limiter's own key is broken, the
-- limiter fails open (failed = true) instead of failing the purchase, which
-- still fails closed on its own keys. Numbers go through tonumber().

local function rate_limit(rl_key, meta_key, user_field, ip_field, d_ur, d_ub, d_ir, d_ib, now)
  local o = redis.call('HMGET', meta_key, 'rlUserRate', 'rlUserBurst', 'rlIpRate', 'rlIpBurst')
  local buckets = {{user_field, tonumber(o[1]) or tonumber(d_ur), tonumber(o[2]) or tonumber(d_ub)}}
  if ip_field ~= '' then
    buckets[2] = {ip_field, tonumber(o[3]) or tonumber(d_ir), tonumber(o[4]) or tonumber(d_ib)}
  end
  local wait, levels = 0, {}
  for i, b in ipairs(buckets) do
    local raw = redis.pcall('HGET', rl_key, b[1])
    if type(raw) == 'table' and raw.err then
      return true, 0, true
    end
    local level = b[3]
    if raw then
      local sep = string.find(raw, ':', 1, true)
      if sep then
        local tokens = tonumber(string.sub(raw, 1, sep - 1)) or b[3]
        local last = tonumber(string.sub(raw, sep + 1)) or now
        level = math.min(b[3], tokens + math.max(0, now - last) * b[2] / 1000)
      end
    end
    levels[i] = level
    if level < 1 then
      wait = math.max(wait, math.ceil((1 - level) * 1000 / b[2]))
    end
  end
  if wait > 0 then
    return false, wait, false
  end
  for i, b in ipairs(buckets) do
    local ok = redis.pcall('HSET', rl_key, b[1], tostring(levels[i] - 1) .. ':' .. now)
    if type(ok) == 'table' and ok.err then
      return true, 0, true
    end
  end
  -- A short sliding expiry: an idle buyer's bucket is full again anyway.
  redis.pcall('PEXPIRE', rl_key, 600000)
  return true, 0, false
end

