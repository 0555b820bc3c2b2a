-- RPermitExpirableSemaphore availablePermits, reclaiming expired permits
-- first. Fragments before: _publish.lua, _object_semaphore.lua,
-- _count_check.lua, _psem_check.lua, _psem_reclaim.lua.
-- KEYS[1] name, KEYS[2] {name}:timeout, KEYS[3] redisson_sc:{name}
-- ARGV[1] now (epoch ms), ARGV[2] publish command
-- Returns the count (0 when not set).
return tonumber(cur or '0')
