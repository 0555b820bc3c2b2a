-- RSemaphore availablePermits. Fragments before: _object_semaphore.lua,
-- _count_check.lua.
-- KEYS[1] name
-- Returns the count (0 when not set).
return tonumber(cur or '0')
