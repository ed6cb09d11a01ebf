-- set_status.lua: an operator's pause or resume, on one key group of a
-- sale, only if the group is loaded (a lost group is rebuilt with the status
-- the sales table holds; creating meta here would make a sale without stock).
-- KEYS[1] meta  ARGV[1] LIVE or PAUSED
-- Reply: 1 when applied, 0 when the group has no keys.
if ARGV[1] ~= 'LIVE' and ARGV[1] ~= 'PAUSED' then
  return redis.error_reply('ERR status must be LIVE or PAUSED')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
return 1
