-- RReadWriteLock write acquire. Free: take it as write. Write mode held by
-- this owner: re-enter (the lease is reset, as LOCK). A reader of the lock
-- asking for it: an error (it would wait for itself). Fragments before:
-- _rw_mode.lua ("mode").
-- KEYS[1] name
-- ARGV[1] lease ms, ARGV[2] writer (<owner>:write), ARGV[3] reader (<owner>)
-- Returns {1, write count} when acquired, else {0, PTTL}, or an error.
if mode == false then
    redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, 1}
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local n = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, n}
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return redis.error_reply('ERR upgrade from read to write lock is not supported; RUNLOCK first')
end
return {0, redis.call('pttl', KEYS[1])}
