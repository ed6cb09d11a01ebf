-- set_buyer.lua: set a buyer's count to what the ledger proves they hold
-- (reconcile's repair: down for a count left without a reservation, up for
-- a buyer a failover made Redis forget), only if the count is still the one
-- reconcile read: a purchase or a release made since then is never erased.
-- KEYS[1] buyers  KEYS[2] meta (for the keys' expiry)
-- ARGV[1] userId  ARGV[2] units they provably hold  ARGV[3] the count
-- reconcile read
-- Reply: the count now.
local now = tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
local want = tonumber(ARGV[2])
if now ~= tonumber(ARGV[3]) or now == want then
  return now
end
if want <= 0 then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], want)
  local expire_at = tonumber(redis.call('HGET', KEYS[2], 'expireAtMs'))
  if expire_at then
    redis.call('PEXPIREAT', KEYS[1], expire_at)
  end
end
return want
