-- set_status.lua: an operator's pause or resume, on one key group of a
-- sale, only if the group is loaded (a lost group is rebuilt with the status
-- the sales table holds; creating meta here would make a sale without stock).
-- KEYS[1] meta  ARGV[1] LIVE, PAUSED, or OPEN
--
-- LIVE and PAUSED are an operator's, and apply whatever the group holds.
-- OPEN is prewarm's, after a read of the sales table made after its own
-- load: it opens the group only if a load closed it (LOADING, see
-- load_sale.lua), so a pause an operator made since that read, which set
-- PAUSED, is never undone by it.
-- Reply: 1 when applied, 0 when the group has no keys (or, for OPEN, was
-- not closed by a load).
if ARGV[1] ~= 'LIVE' and ARGV[1] ~= 'PAUSED' and ARGV[1] ~= 'OPEN' then
  return redis.error_reply('ERR status must be LIVE, PAUSED or OPEN')
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
if ARGV[1] == 'OPEN' then
  if redis.call('HGET', KEYS[1], 'status') ~= 'LOADING' then
    return 0
  end
  redis.call('HSET', KEYS[1], 'status', 'LIVE')
  return 1
end
redis.call('HSET', KEYS[1], 'status', ARGV[1])
return 1
