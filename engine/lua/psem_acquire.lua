-- RPermitExpirableSemaphore tryAcquire(1, lease): take one permit and
-- record its id with its expiry (the sentinel for none); the ZSET follows
-- the count's TTL. Otherwise report the earliest expiry (the time worth
-- re-checking at). Fragments before: _publish.lua, _object_semaphore.lua,
-- _count_check.lua, _psem_check.lua, _psem_reclaim.lua.
-- KEYS[1] name, KEYS[2] {name}:timeout, KEYS[3] redisson_sc:{name}
-- ARGV[1] now (epoch ms), ARGV[2] expiry (epoch ms, or the sentinel),
-- ARGV[3] permit id (16 raw bytes), ARGV[4] sentinel 922337203685477,
-- ARGV[5] publish command
-- Returns {1, left}, {0, earliest expiry or -1}, {-1, 0} (not set).
if not cur then
    return {-1, 0}
end
if tonumber(cur) >= 1 then
    local v = redis.call('decrby', KEYS[1], 1)
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[3])
    local ttl = redis.call('pttl', KEYS[1])
    if ttl > 0 then
        redis.call('pexpire', KEYS[2], ttl)
    end
    return {1, v}
end
local e = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if e[2] and tonumber(e[2]) ~= tonumber(ARGV[4]) then
    return {0, tonumber(e[2])}
end
return {0, -1}
