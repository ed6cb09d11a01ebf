-- unlock.lua: release a lock only if we still own it (its value is our
-- token), so a run whose lock expired cannot free someone else's.
-- KEYS[1] lock  ARGV[1] token.  Replies 1 if released, 0 otherwise.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
