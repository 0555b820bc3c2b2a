-- State of a lock as seen by one owner (LOCK.INFO).
-- KEYS[1] name
-- ARGV[1] owner
-- Returns {exists 0|1, the owner's count, PTTL}.
local e = redis.call('exists', KEYS[1])
local c = 0
if e == 1 then
    local v = redis.call('hget', KEYS[1], ARGV[1])
    if v then
        c = tonumber(v)
    end
end
return {e, c, redis.call('pttl', KEYS[1])}
