-- Settles one writer (hold.h): a write count above ARGV[2] becomes
-- ARGV[2]; at 0 the write hold goes as a write unlock's last one does
-- ("1": readers go). Fragments before: _publish.lua.
-- KEYS[1] name, KEYS[2] redisson_rwlock:{name}
-- ARGV[1] writer, ARGV[2] keep, ARGV[3] publish command
-- Returns the writer's count before.
if redis.call('hget', KEYS[1], 'mode') ~= 'write' then
    return 0
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if n <= tonumber(ARGV[2]) then
    return n
end
if ARGV[2] ~= '0' then
    redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
    return n
end
redis.call('hdel', KEYS[1], ARGV[1])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(publish, KEYS[2], '1')
return n
