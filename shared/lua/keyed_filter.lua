-- keyed_filter.lua: what an environment needs to answer a keyed purchase
-- of a sold-out sale without Redis (see keyed.lua).
-- KEYS[1] sale:{S}:keyed   KEYS[2] sale:{S}:resv
-- Replies: {"FILTER", bitmap}; {"EMPTY"}: no reservation at all, so none
-- under any key; {"UNKNOWN"}: reservations but no filter (made before the
-- filter existed, or a group rebuilt by an older version): every keyed
-- request goes to Redis.
local bits = redis.call('GET', KEYS[1])
if bits then
  return {'FILTER', bits}
end
if redis.call('HLEN', KEYS[2]) == 0 then
  return {'EMPTY'}
end
return {'UNKNOWN'}
