-- The seed article's minimal deduction script (../shared/seeds,
-- redis-lua-deduction), as `make bench` runs it for the honest ceiling: the
-- least work one Redis must do per purchase decision (a buyer set, a stock
-- counter, nothing else). Never used by the functions.
--
-- KEYS[1] stock   KEYS[2] buyers (set)
-- ARGV[1] units   ARGV[2] buyer
if redis.call('SISMEMBER', KEYS[2], ARGV[2]) == 1 then
  return -2
end
local stock = redis.call('GET', KEYS[1])
if not stock then
  return -1
end
if tonumber(stock) < tonumber(ARGV[1]) then
  return 0
end
redis.call('DECRBY', KEYS[1], ARGV[1])
redis.call('SADD', KEYS[2], ARGV[2])
return 1
