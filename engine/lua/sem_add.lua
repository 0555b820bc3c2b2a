-- RSemaphore addPermits: the count may go down (and below 0); only an
-- increase publishes, and only a positive count. Fragments before:
-- _publish.lua, _object_semaphore.lua, _count_check.lua.
-- KEYS[1] name, KEYS[2] redisson_sc:{name}
-- ARGV[1] delta, ARGV[2] publish command
-- Returns the new count.
local v = redis.call('incrby', KEYS[1], ARGV[1])
if tonumber(ARGV[1]) > 0 and v > 0 then
    redis.call(publish, KEYS[2], v)
end
return v
