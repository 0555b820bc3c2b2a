-- Batched ReadLockTask: for each (name, reader) still holding reads,
-- extend every one of its timeout keys and the hash (never shortening
-- it). The {name} rule is applied here, as px_channel_name() does. pcall
-- keeps one odd key from failing the batch. Every key of a batch is in
-- one cluster slot (watchdog.c groups them).
-- KEYS[1..N] names
-- ARGV[1] lease ms, ARGV[2..N+1] readers (ARGV[i + 1] for KEYS[i])
-- Returns {1 renewed | 0 not held, ...} in KEYS order.
local r = {}
for i = 1, #KEYS do
    local v = redis.pcall('hget', KEYS[i], ARGV[i + 1])
    local n = (type(v) == 'string') and tonumber(v)
    if n and n > 0 then
        local p = KEYS[i]
        if not string.find(p, '{', 1, true) then
            p = '{' .. p .. '}'
        end
        for k = n, 1, -1 do
            redis.call('pexpire', p .. ':' .. ARGV[i + 1] .. ':rwlock_timeout:' .. k, ARGV[1])
        end
        if redis.call('pttl', KEYS[i]) < tonumber(ARGV[1]) then
            redis.call('pexpire', KEYS[i], ARGV[1])
        end
        r[i] = 1
    else
        r[i] = 0
    end
end
return r
