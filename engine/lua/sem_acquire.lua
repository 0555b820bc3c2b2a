-- RSemaphore tryAcquire(n), and the proxy's record of who took them.
-- Fragments before: _object_semaphore.lua, _count_check.lua ("cur").
-- KEYS[1] name; KEYS[2] (a tracked acquire, not KEEP)
-- {name}:lp-permits:<proxy-uuid>, a hash: connection id -> permits taken
-- ARGV[1] permits; ARGV[2] (with KEYS[2]) the taking connection's id
-- Returns {1, left} (taken), {0, available} (not enough), {-1, 0} (not set).
-- The record is written in the same script as the count, so a master (or
-- a replica promoted later) has both or neither: what it records is what
-- the proxy may give back (sem_release.lua, sem_return.lua).
if not cur then
    return {-1, 0}
end
if tonumber(cur) >= tonumber(ARGV[1]) then
    local left = redis.call('decrby', KEYS[1], ARGV[1])
    if KEYS[2] then
        redis.call('hincrby', KEYS[2], ARGV[2], ARGV[1])
    end
    return {1, left}
end
return {0, tonumber(cur)}
