-- RPermitExpirableSemaphore trySetPermits. Fragments before:
-- _publish.lua, _object_semaphore.lua, _count_check.lua, _psem_check.lua.
-- KEYS[1] name, KEYS[2] {name}:timeout, KEYS[3] redisson_sc:{name}
-- ARGV[1] permits, ARGV[2] publish command
-- Returns 1 (set), 0 (already set).
if cur then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(publish, KEYS[3], ARGV[1])
return 1
