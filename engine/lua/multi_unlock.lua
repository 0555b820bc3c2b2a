-- MULTIUNLOCK over names of one slot: Redisson's RLock unlock
-- (unlockInnerAsync, without the latch) on every key, refusing a
-- read-write lock's hash before anything is written. Fragments before:
-- _publish.lua.
-- KEYS[1..N] names, KEYS[N+1..2N] their redisson_lock__channel:{name}
-- ARGV[1] owner, ARGV[2..N+1] lease ms of each name, ARGV[N+2] publish
-- Returns {r1, ..., rN}: -1 not held by the owner, 0 still held, 1 released.
local n = #KEYS / 2
local held = {}
for i = 1, n do
    local v = redis.call('hmget', KEYS[i], 'mode', ARGV[1])
    if v[1] then
        return redis.error_reply('WRONGTYPE the name holds a read-write lock (use RLOCK/WLOCK)')
    end
    held[i] = v[2]
end
local r = {}
for i = 1, n do
    if not held[i] then
        r[i] = -1
    elseif redis.call('hincrby', KEYS[i], ARGV[1], -1) > 0 then
        redis.call('pexpire', KEYS[i], ARGV[i + 1])
        r[i] = 0
    else
        redis.call('del', KEYS[i])
        redis.call(publish, KEYS[n + i], '0')
        r[i] = 1
    end
end
return r
