-- Fragment (last): a read hold is gone; settle the hash as Redisson's read
-- unlock does, then return "r" (set before, as "mode"). While other
-- holders remain, the hash lives as long as the longest remaining read
-- hold; with none left (or only expired ones), it goes and "0" wakes a
-- waiter. In write mode the writer's lease rules: nothing changes.
-- Needs KEYS[1] name, KEYS[2] channel, KEYS[4] {name}, and the local publish.
if mode == 'write' then
    return r
end
if redis.call('hlen', KEYS[1]) > 1 then
    local m = -3
    for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
        local n = tonumber(redis.call('hget', KEYS[1], f))
        if n then
            for i = n, 1, -1 do
                m = math.max(m, redis.call('pttl', KEYS[4] .. ':' .. f .. ':rwlock_timeout:' .. i))
            end
        end
    end
    if m > 0 then
        redis.call('pexpire', KEYS[1], m)
        return r
    end
end
redis.call('del', KEYS[1])
redis.call(publish, KEYS[2], '0')
return r
