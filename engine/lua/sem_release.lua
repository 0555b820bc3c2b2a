-- RSemaphore release(n); with ARGV[2] = 1 only to a semaphore that exists.
-- Fragments before: _publish.lua, _object_semaphore.lua, _count_check.lua,
-- _sem_once.lua (a number that ran already changes nothing).
-- KEYS[1] name, KEYS[2] redisson_sc:{name}, KEYS[3] {name}:lp-permits:<uuid>,
-- KEYS[4] {name}:lp-released:<uuid>
-- ARGV[1] permits, ARGV[2] only if it exists (0|1), ARGV[3] the
-- connection's id, ARGV[4] how many of the n are its own as the proxy
-- counts them (0 when it took none), ARGV[5] the release's number; last
-- ARGV: the publish command.
-- Own permits this master does not record (a failover to a replica that
-- missed the acquire, a restart without persistence) are free here
-- already: they are not added again, and their number is returned.
-- Returns {1, new count, lost, left} or {0, 0, 0, 0} (not set, nothing
-- done); left: what the record still has for the connection (an acquire
-- whose outcome the proxy never learnt, a release a failover lost).
if ARGV[2] == '1' and not cur then
    return {0, 0, 0, 0}
end
local lost, left = 0, 0
do
    local own = tonumber(ARGV[4])
    local had = tonumber(redis.call('hget', KEYS[3], ARGV[3]) or '0')
    local take = math.min(own, had)
    lost = own - take
    left = had - take
    -- take may be 0 (an acquire whose outcome the proxy never learnt left
    -- the record above the caller's own count): -take would then be the
    -- number -0, which reaches HINCRBY as "-0", not an integer to Redis.
    if left > 0 then
        if take > 0 then
            redis.call('hincrby', KEYS[3], ARGV[3], -take)
        end
    elseif had > 0 then
        redis.call('hdel', KEYS[3], ARGV[3])
    end
end
local add = tonumber(ARGV[1]) - lost
if add == 0 then
    return {1, tonumber(cur or '0'), lost, left}
end
local v = redis.call('incrby', KEYS[1], add)
if v > 0 then
    redis.call(publish, KEYS[2], v)
end
return {1, v, lost, left}
