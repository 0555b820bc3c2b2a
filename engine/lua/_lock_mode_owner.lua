-- Fragment: one HMGET reads 'mode' and the owner's count (ARGV[2]), so
-- refusing a read-write lock's hash costs nothing more than Redisson's
-- HEXISTS. Leaves the local "v" ({mode, count}).
local v = redis.call('hmget', KEYS[1], 'mode', ARGV[2])
if v[1] then
    return redis.error_reply('WRONGTYPE the name holds a read-write lock (use RLOCK/WLOCK)')
end
