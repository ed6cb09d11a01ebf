-- outcomes.lua: adds one execution environment's purchase answers of the
-- last second(s) to a sale's tally, for the operator dashboard
-- (GET /admin/sales/{saleId}/live).
--
-- KEYS[1] sale:{S}:meta  KEYS[2] sale:{S}:outcomes
-- ARGV: outcome, count, outcome, count, ... (codes as the Purchases metric)
--
-- Not part of the purchase script: the hot path stays one EVALSHA with no
-- extra writes; each environment sends this at most once a second.
-- Only a sale Redis holds gets a tally (no key for an unknown or unloaded
-- sale), and the tally expires with the sale's keys (meta's expireAtMs).
-- Replies: 1 when added, 0 when the sale has no keys (nothing written).

local expire_at = tonumber(redis.call('HGET', KEYS[1], 'expireAtMs'))
if not expire_at then
  return 0
end
for i = 1, #ARGV - 1, 2 do
  redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('PEXPIREAT', KEYS[2], expire_at)
return 1
