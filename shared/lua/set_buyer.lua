-- set_buyer.lua: lower a buyer's count to what the truth says they hold
-- (reconciliation's repair of a count left without a reservation). Never
-- raises it: only the purchase script adds units.
-- KEYS[1] buyers  ARGV[1] userId  ARGV[2] units they provably hold
-- Reply: the count now.
local now = tonumber(redis.call('HGET', KEYS[1], ARGV[1])) or 0
local want = tonumber(ARGV[2])
if now > want then
  if want <= 0 then
    redis.call('HDEL', KEYS[1], ARGV[1])
  else
    redis.call('HSET', KEYS[1], ARGV[1], want)
  end
  return want
end
return now
