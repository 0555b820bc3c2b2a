-- Redisson's read unlock (without the latch). Fragments before:
-- _publish.lua, _rw_mode.lua ("mode"); after: _rw_settle.lua.
-- KEYS[1] name, KEYS[2] redisson_rwlock:{name},
-- KEYS[3] {name}:<reader>:rwlock_timeout, KEYS[4] {name}
-- ARGV[1] reader, ARGV[2] publish command
-- Returns nil (not held by the reader), 0 (it has more read holds), 1
-- (its last read hold went).
if mode == false then
    redis.call(publish, KEYS[2], '0')
    return nil
end
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return nil
end
local c = redis.call('hincrby', KEYS[1], ARGV[1], -1)
if c == 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
end
redis.call('del', KEYS[3] .. ':' .. (c + 1))
local r = 0
if c == 0 then
    r = 1
end
