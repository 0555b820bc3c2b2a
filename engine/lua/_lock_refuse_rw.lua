-- Fragment: a free name costs Redisson's three calls (EXISTS, HINCRBY,
-- PEXPIRE); only an existing hash is checked for a read-write lock's
-- 'mode' field (whose read owner fields look like ours). HEXISTS fails
-- with WRONGTYPE on other types. Leaves the local "free".
local free = redis.call('exists', KEYS[1]) == 0
if not free and redis.call('hexists', KEYS[1], 'mode') == 1 then
    return redis.error_reply('WRONGTYPE the name holds a read-write lock (use RLOCK/WLOCK)')
end
