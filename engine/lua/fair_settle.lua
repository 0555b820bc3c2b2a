-- Settles one owner of a fair lock (hold.h): a count above ARGV[4] becomes
-- ARGV[4] (at 0 the lock goes and the queue head is woken); with ARGV[5] =
-- 1 the owner also leaves the queue as Redisson's acquireFailed does:
-- later waiters' deadlines move up by its threadWaitTime (ARGV[6]), then
-- ZREM + LREM, and if it was the head of a free lock, the new head is
-- woken (it would otherwise wait for its re-poll). Fragments before:
-- _publish.lua, _fair_cleanup.lua, _fair_wake_head.lua.
-- KEYS[1] name, KEYS[2] redisson_lock_queue:{name},
-- KEYS[3] redisson_lock_timeout:{name}
-- ARGV[1] now (epoch ms), ARGV[2] owner, ARGV[3] redisson_lock__channel:{name},
-- ARGV[4] keep, ARGV[5] dequeue (0|1), ARGV[6] threadWaitTime ms,
-- ARGV[7] publish command
-- Returns the owner's count before.
fair_cleanup(KEYS[2], KEYS[3], ARGV[1])
local c = 0
if redis.call('hexists', KEYS[1], 'mode') == 0 then
    c = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
end
if c > tonumber(ARGV[4]) then
    if ARGV[4] == '0' then
        redis.call('del', KEYS[1])
        fair_wake_head()
    else
        redis.call('hset', KEYS[1], ARGV[2], ARGV[4])
    end
end
if ARGV[5] == '1' then
    local q = redis.call('lrange', KEYS[2], 0, -1)
    local i = 1
    while i <= #q and q[i] ~= ARGV[2] do
        i = i + 1
    end
    redis.call('zrem', KEYS[3], ARGV[2])
    if i <= #q then
        for k = i + 1, #q do
            redis.call('zincrby', KEYS[3], -tonumber(ARGV[6]), q[k])
        end
        redis.call('lrem', KEYS[2], 0, ARGV[2])
        if i == 1 and redis.call('exists', KEYS[1]) == 0 then
            fair_wake_head()
        end
    end
end
return c
