-- RSemaphore tryAcquire(n). Fragments before: _object_semaphore.lua,
-- _count_check.lua ("cur").
-- KEYS[1] name
-- ARGV[1] permits
-- Returns {1, left} (taken), {0, available} (not enough), {-1, 0} (not set).
if not cur then
    return {-1, 0}
end
if tonumber(cur) >= tonumber(ARGV[1]) then
    return {1, redis.call('decrby', KEYS[1], ARGV[1])}
end
return {0, tonumber(cur)}
