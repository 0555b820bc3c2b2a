-- RCountDownLatch countDown; a latch that is not set stays absent
-- (nothing to count). Fragments before: _publish.lua, _object_latch.lua,
-- _count_check.lua.
-- KEYS[1] name, KEYS[2] redisson_countdownlatch__channel__{name}
-- ARGV[1] publish command
-- Returns the count left (0 when open).
if not cur then
    return 0
end
local v = redis.call('decr', KEYS[1])
if v <= 0 then
    redis.call('del', KEYS[1])
end
if v == 0 then
    redis.call(publish, KEYS[2], '0')
end
if v < 0 then
    return 0
end
return v
