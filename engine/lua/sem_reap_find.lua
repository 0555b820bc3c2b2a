-- A dead proxy's semaphores (sem_reap.c): the first registered proxy,
-- other than ARGV[2], whose liveness key expired, with up to ARGV[3] of
-- its semaphore names; it is marked reaped (so that, were it only
-- stopped, it learns its records are gone). A dead proxy with none left
-- leaves the registry. Returns {uuid, {names}} or {}.
-- KEYS[1] {lp-proxies}:all; ARGV[1] "{lp-proxies}:", ARGV[2] own uuid,
-- ARGV[3] names at most
for _, u in ipairs(redis.call('smembers', KEYS[1])) do
    if u ~= ARGV[2] and redis.call('exists', ARGV[1] .. 'live:' .. u) == 0 then
        redis.call('set', ARGV[1] .. 'reaped:' .. u, '1', 'px', 86400000)
        local names = redis.call('srandmember', ARGV[1] .. 'sems:' .. u, tonumber(ARGV[3]))
        if #names > 0 then
            return {u, names}
        end
        redis.call('srem', KEYS[1], u)
    end
end
return {}
