-- RedissonFencedLock's acquire: every success, re-entry included, takes
-- the next token from redisson_lock_token:{name} (which never expires),
-- first raised to the proxy's floor: the highest token it saw for the
-- name, which Redis may have lost (a restart without persistence, a
-- failover that lost writes; proxy/locks/fence.h). SET of the floor's
-- own digits, then INCR: exact, whatever the size.
-- Fragments before: _lock_refuse_rw.lua ("free").
-- KEYS[1] name, KEYS[2] redisson_lock_token:{name}
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] floor (0: none)
-- Returns {1, count, token} when acquired, else {0, PTTL}.
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    if ARGV[3] ~= '0' then
        local cur = tonumber(redis.call('get', KEYS[2]) or '0')
        if cur and cur < tonumber(ARGV[3]) then
            redis.call('set', KEYS[2], ARGV[3])
        end
    end
    local t = redis.call('incr', KEYS[2])
    local c = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, c, t}
end
return {0, redis.call('pttl', KEYS[1])}
