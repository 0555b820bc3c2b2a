-- Redisson's RFairLock unlock (without the latch); a lock found gone still
-- wakes the head, but answers nil (not held). Fragments before:
-- _publish.lua, _fair_mode.lua, _fair_cleanup.lua, _fair_wake_head.lua.
-- KEYS[1] name, KEYS[2] redisson_lock_queue:{name},
-- KEYS[3] redisson_lock_timeout:{name}
-- ARGV[1] now (epoch ms), ARGV[2] owner, ARGV[3] redisson_lock__channel:{name},
-- ARGV[4] lease ms, ARGV[5] publish command
-- Returns nil (not held by the owner), 0 (still held), 1 (released).
fair_cleanup(KEYS[2], KEYS[3], ARGV[1])
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    if redis.call('exists', KEYS[1]) == 0 then
        fair_wake_head()
    end
    return nil
end
local c = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if c > 0 then
    redis.call('pexpire', KEYS[1], ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
fair_wake_head()
return 1
