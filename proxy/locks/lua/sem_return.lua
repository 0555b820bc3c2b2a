-- A closed connection's permits back (sem.c): as a release that only goes
-- to an existing semaphore, but at most once per marker (KEYS[3], set NX
-- with a TTL), so that a resend after a lost reply does not return them
-- twice. Fragments before: _publish.lua, _object_semaphore.lua,
-- _count_check.lua.
-- KEYS[1] name, KEYS[2] redisson_sc:{name},
-- KEYS[3] {name}:lp-return:<proxy-uuid>:<n>
-- ARGV[1] permits, ARGV[2] marker TTL ms, ARGV[3] publish command
-- Returns {1, new count}, {0, 0} (not set) or {2, 0} (returned before).
if not cur then
    return {0, 0}
end
if not redis.call('set', KEYS[3], '1', 'NX', 'PX', ARGV[2]) then
    return {2, 0}
end
local v = redis.call('incrby', KEYS[1], ARGV[1])
if v > 0 then
    redis.call(publish, KEYS[2], v)
end
return {1, v}
