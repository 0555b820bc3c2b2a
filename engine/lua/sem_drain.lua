-- RSemaphore drainPermits: takes every available permit (DECRBY keeps a
-- TTL). Fragments before: _object_semaphore.lua, _count_check.lua.
-- KEYS[1] name
-- Returns the permits drained.
local v = tonumber(cur or '0')
if v <= 0 then
    return 0
end
redis.call('decrby', KEYS[1], v)
return v
