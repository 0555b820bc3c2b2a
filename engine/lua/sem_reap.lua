-- A dead proxy's permits of one semaphore back (sem_reap.c): the sum of
-- its ledger (KEYS[3], connection -> permits taken through it) is added to
-- the count, if the semaphore still exists, and the ledger goes in the
-- same script, so a second reaper (or a resend) returns nothing twice.
-- Fragments before: _publish.lua.
-- KEYS[1] name, KEYS[2] redisson_sc:{name}, KEYS[3] {name}:lp-permits:<uuid>
-- ARGV: last: publish. Returns the permits given back.
local n = 0
for _, v in ipairs(redis.call('hvals', KEYS[3])) do
    n = n + (tonumber(v) or 0)
end
redis.call('del', KEYS[3])
if n <= 0 or redis.call('type', KEYS[1]).ok ~= 'string' then
    return 0
end
local v = redis.call('incrby', KEYS[1], n)
if v > 0 then
    redis.call(publish, KEYS[2], v)
end
return n
