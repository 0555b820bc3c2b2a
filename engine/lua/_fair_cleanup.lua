-- Fragment: Redisson's stale-waiter cleanup of a fair lock. While the
-- queue has a head whose deadline in the timeouts zset is at or before
-- now (or missing: a half-written entry, where Redisson's Lua would fail
-- comparing nil), drop it.
local function fair_cleanup(queue, timeouts, now)
    while true do
        local h = redis.call('lindex', queue, 0)
        if h == false then
            break
        end
        local s = redis.call('zscore', timeouts, h)
        if s ~= false and tonumber(s) > tonumber(now) then
            break
        end
        redis.call('zrem', timeouts, h)
        redis.call('lpop', queue)
    end
end
