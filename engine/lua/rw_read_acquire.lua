-- RReadWriteLock read acquire. Free: take it as read. Read mode, or write
-- mode held by this owner's write hold (downgrade): one more read hold,
-- with its timeout key. Else report the PTTL. Fragments before:
-- _rw_mode.lua ("mode").
-- KEYS[1] name, KEYS[2] {name}:<reader>:rwlock_timeout
-- ARGV[1] lease ms, ARGV[2] reader, ARGV[3] writer (reader .. ':write')
-- Returns {1, read count} when acquired, else {0, PTTL}.
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'read', ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
if mode == 'read' or redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. n, 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
    return {1, n}
end
return {0, redis.call('pttl', KEYS[1])}
