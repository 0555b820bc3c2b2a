-- RSemaphore release(n); with ARGV[2] = 1 only to a semaphore that exists.
-- Fragments before: _publish.lua, _object_semaphore.lua, _count_check.lua.
-- KEYS[1] name, KEYS[2] redisson_sc:{name}
-- ARGV[1] permits, ARGV[2] only if it exists (0|1), ARGV[3] publish command
-- Returns {1, new count} or {0, 0} (not set, nothing done).
if ARGV[2] == '1' and not cur then
    return {0, 0}
end
local v = redis.call('incrby', KEYS[1], ARGV[1])
if v > 0 then
    redis.call(publish, KEYS[2], v)
end
return {1, v}
