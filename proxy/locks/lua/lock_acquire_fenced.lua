-- RedissonFencedLock's acquire: every success, re-entry included, takes
-- the next token from redisson_lock_token:{name} (which never expires).
-- Fragments before: _lock_refuse_rw.lua ("free").
-- KEYS[1] name, KEYS[2] redisson_lock_token:{name}
-- ARGV[1] lease ms, ARGV[2] owner
-- Returns {1, count, token} when acquired, else {0, PTTL}.
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local t = redis.call('incr', KEYS[2])
    local c = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, c, t}
end
return {0, redis.call('pttl', KEYS[1])}
