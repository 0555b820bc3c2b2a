-- Settles one owner of an RLock hash (hold.h): a count above ARGV[2]
-- becomes ARGV[2]; at 0 the hold goes and "0" wakes a waiter (a release
-- on disconnect, the roll-back of an unconfirmed acquisition). A count
-- kept gets the TTL ARGV[3] back when not 0: the acquire rolled back may
-- have run its PEXPIRE with a shorter LEASE than the hold's.
-- KEYS[1] name, KEYS[2] redisson_lock__channel:{name}
-- ARGV[1] owner, ARGV[2] keep, ARGV[3] TTL ms of the hold kept (0: leave
-- it), ARGV[4] publish command
-- Returns the owner's count before.
local c = tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0')
if c <= tonumber(ARGV[2]) then
    return c
end
if ARGV[2] == '0' then
    redis.call('del', KEYS[1])
    redis.call(publish, KEYS[2], '0')
    return c
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] ~= '0' then
    redis.call('pexpire', KEYS[1], ARGV[3])
end
return c
