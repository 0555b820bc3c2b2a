-- RPermitExpirableSemaphore release(id): unknown -> -1; else the permit
-- (and any expired one) goes back. Fragments before: _publish.lua,
-- _object_semaphore.lua, _count_check.lua, _psem_check.lua.
-- KEYS[1] name, KEYS[2] {name}:timeout, KEYS[3] redisson_sc:{name}
-- ARGV[1] permit id, ARGV[2] now (epoch ms), ARGV[3] publish command
-- Returns 1 (released), 0 (it had expired before the release), -1 (unknown id).
local s = redis.call('zscore', KEYS[2], ARGV[1])
if not s then
    return -1
end
redis.call('zrem', KEYS[2], ARGV[1])
local n = 1 + redis.call('zremrangebyscore', KEYS[2], 0, ARGV[2])
local v = redis.call('incrby', KEYS[1], n)
if v > 0 then
    redis.call(publish, KEYS[3], v)
end
if tonumber(s) <= tonumber(ARGV[2]) then
    return 0
end
return 1
