-- A closed connection's permits back (sem_track.c): what this master
-- records the connection took through this proxy (its field of KEYS[3];
-- with ARGV[3] > 0, at most that many: a record read earlier), less
-- ARGV[2] (permits other connections released for it), to a semaphore
-- that still exists. The field goes in the same script, so a resend after a lost
-- reply returns nothing twice, and permits this master never recorded
-- (lost in a failover or a restart) are not added: they are free here.
-- Fragments before: _publish.lua, _object_semaphore.lua, _count_check.lua.
-- KEYS[1] name, KEYS[2] redisson_sc:{name}, KEYS[3] {name}:lp-permits:<uuid>
-- ARGV[1] the connection's id, ARGV[2] released for it, ARGV[3] at most
-- (0: all); last: publish
-- Returns {1, new count, returned}, {0, 0, 0} (not set) or {2, 0, 0}
-- (nothing to return).
local had = tonumber(redis.call('hget', KEYS[3], ARGV[1]) or '0')
local give = had
if tonumber(ARGV[3]) > 0 and tonumber(ARGV[3]) < had then
    give = tonumber(ARGV[3])
    redis.call('hincrby', KEYS[3], ARGV[1], -give)
elseif had > 0 then
    redis.call('hdel', KEYS[3], ARGV[1])
end
local n = give - tonumber(ARGV[2])
if not cur then
    return {0, 0, 0}
end
if n <= 0 then
    return {2, 0, 0}
end
local v = redis.call('incrby', KEYS[1], n)
if v > 0 then
    redis.call(publish, KEYS[2], v)
end
return {1, v, n}
