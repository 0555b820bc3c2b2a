-- Redisson's write unlock (without the latch); a release that leaves the
-- writer's own reads turns the mode back to read and still publishes "1".
-- Fragments before: _publish.lua, _rw_mode.lua ("mode").
-- KEYS[1] name, KEYS[2] redisson_rwlock:{name}
-- ARGV[1] lease ms, ARGV[2] writer, ARGV[3] publish command
-- Returns nil (not held by the writer), 0 (still held), 1 (released).
if mode == false then
    redis.call(publish, KEYS[2], '1')
    return nil
end
if mode ~= 'write' or redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return nil
end
local c = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if c > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[2])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
redis.call(publish, KEYS[2], '1')
return 1
