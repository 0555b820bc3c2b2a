-- Settles one reader (hold.h): read holds above ARGV[2] go (their timeout
-- keys with them); at 0 the reader leaves, and the hash is settled as a
-- read unlock does. Fragments before: _publish.lua; after: _rw_settle.lua.
-- KEYS[1] name, KEYS[2] redisson_rwlock:{name},
-- KEYS[3] {name}:<reader>:rwlock_timeout, KEYS[4] {name}
-- ARGV[1] reader, ARGV[2] keep, ARGV[3] publish command
-- Returns the reader's count before.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false then
    return 0
end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if n == nil then
    return 0
end
local keep = tonumber(ARGV[2])
if n <= keep then
    return n
end
for i = keep + 1, n do
    redis.call('del', KEYS[3] .. ':' .. i)
end
if keep == 0 then
    redis.call('hdel', KEYS[1], ARGV[1])
else
    redis.call('hset', KEYS[1], ARGV[1], keep)
end
local r = n
