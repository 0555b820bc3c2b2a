-- Redisson's RFairLock tryLock (the waiting variant when ARGV[6] is 1):
-- take the free lock if the queue is empty or headed by us (then every
-- remaining deadline moves up by our threadWaitTime), re-enter, or queue
-- up behind the last waiter. Fragments before: _fair_mode.lua,
-- _fair_cleanup.lua.
-- KEYS[1] name, KEYS[2] redisson_lock_queue:{name},
-- KEYS[3] redisson_lock_timeout:{name}
-- ARGV[1] now (epoch ms), ARGV[2] owner, ARGV[3] redisson_lock__channel:{name},
-- ARGV[4] lease ms, ARGV[5] threadWaitTime ms, ARGV[6] may queue (0|1)
-- Returns {1, count} when acquired, else {0, ms until a re-poll is worthwhile}.
fair_cleanup(KEYS[2], KEYS[3], ARGV[1])
local now = tonumber(ARGV[1])
local wt = tonumber(ARGV[5])
if redis.call('exists', KEYS[1]) == 0 then
    local h = redis.call('lindex', KEYS[2], 0)
    if h == false or h == ARGV[2] then
        if h then
            redis.call('lpop', KEYS[2])
        end
        redis.call('zrem', KEYS[3], ARGV[2])
        for _, w in ipairs(redis.call('zrange', KEYS[3], 0, -1)) do
            redis.call('zincrby', KEYS[3], -wt, w)
        end
        redis.call('hset', KEYS[1], ARGV[2], 1)
        redis.call('pexpire', KEYS[1], ARGV[4])
        return {1, 1}
    end
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local c = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[4])
    return {1, c}
end
local ttl = redis.call('pttl', KEYS[1])
if ARGV[6] == '0' then
    return {0, ttl}
end
if redis.call('zscore', KEYS[3], ARGV[2]) == false then
    local last = redis.call('lindex', KEYS[2], -1)
    local base = ttl
    local ls = (last and last ~= ARGV[2]) and redis.call('zscore', KEYS[3], last)
    if ls then
        base = tonumber(ls) - now
    end
    redis.call('zadd', KEYS[3], base + wt + now, ARGV[2])
    redis.call('lrem', KEYS[2], 0, ARGV[2])
    redis.call('rpush', KEYS[2], ARGV[2])
end
if ttl ~= -2 then
    return {0, ttl}
end
local h = redis.call('lindex', KEYS[2], 0)
local hs = h and redis.call('zscore', KEYS[3], h)
if hs then
    return {0, math.max(tonumber(hs) - now, 1)}
end
return {0, 1}
