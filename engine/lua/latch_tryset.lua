-- RCountDownLatch trySetCount. Fragments before: _publish.lua,
-- _object_latch.lua, _count_check.lua ("cur").
-- KEYS[1] name, KEYS[2] redisson_countdownlatch__channel__{name}
-- ARGV[1] count, ARGV[2] publish command
-- Returns 1 (set), 0 (already set).
if cur then
    return 0
end
redis.call('set', KEYS[1], ARGV[1])
redis.call(publish, KEYS[2], '1')
return 1
