-- Redisson's RLock unlock (unlockInnerAsync, without the latch), refusing
-- a read-write lock's hash. Fragments before: _publish.lua,
-- _lock_mode_owner.lua ("v").
-- KEYS[1] name, KEYS[2] redisson_lock__channel:{name}
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] publish command
-- Returns nil (not held by the owner), 0 (still held), 1 (released).
if not v[2] then
    return nil
end
local c = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if c > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('del', KEYS[1])
redis.call(publish, KEYS[2], '0')
return 1
