-- State of a lock as seen by one owner (LOCK.INFO).
-- KEYS[1] name
-- ARGV[1] owner
-- Returns {exists 0|1, the owner's count, PTTL}: the count is the owner's
-- plain, fair or read holds plus its write holds (field owner .. ':write'
-- of a read-write lock).
local e = redis.call('exists', KEYS[1])
local c = 0
if e == 1 then
    for _, f in ipairs({ARGV[1], ARGV[1] .. ':write'}) do
        local v = redis.call('hget', KEYS[1], f)
        if v then
            c = c + tonumber(v)
        end
    end
end
return {e, c, redis.call('pttl', KEYS[1])}
