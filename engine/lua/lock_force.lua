-- forceUnlock of any lock kind: a read-write lock wakes all its waiters
-- ("1" on its channel); otherwise "0" on the lock channel and, after
-- Redisson's stale-waiter cleanup, on the fair queue head's channel.
-- Fragments before: _publish.lua, _fair_cleanup.lua.
-- KEYS[1] name, KEYS[2] redisson_lock__channel:{name},
-- KEYS[3] redisson_rwlock:{name}, KEYS[4] redisson_lock_queue:{name},
-- KEYS[5] redisson_lock_timeout:{name}
-- ARGV[1] redisson_lock__channel:{name} (the fair head's channel is this
-- .. ':' .. owner), ARGV[2] now (epoch ms), ARGV[3] publish command
-- Returns 1 (deleted), 0 (not locked), or WRONGTYPE.
local t = redis.call('type', KEYS[1])['ok']
if t == 'none' then
    return 0
end
if t ~= 'hash' then
    return redis.error_reply('WRONGTYPE the name holds a ' .. t .. ', not a lock')
end
local mode = redis.call('hget', KEYS[1], 'mode')
redis.call('del', KEYS[1])
if mode then
    redis.call(publish, KEYS[3], '1')
    return 1
end
redis.call(publish, KEYS[2], '0')
fair_cleanup(KEYS[4], KEYS[5], ARGV[2])
local h = redis.call('lindex', KEYS[4], 0)
if h then
    redis.call(publish, ARGV[1] .. ':' .. h, '0')
end
return 1
