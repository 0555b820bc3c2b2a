-- Redisson's RLock acquire (tryLockInnerAsync), refusing a read-write
-- lock's hash. Fragments before: _lock_refuse_rw.lua ("free").
-- KEYS[1] name
-- ARGV[1] lease ms, ARGV[2] owner
-- Returns -2 - count (<= -3) when acquired (or re-entered), else the
-- holder's PTTL (>= -2): one integer costs Redis less than a table, and no
-- unlock answer (nil, 0, 1, 2) reads as a grant (proxy/locks/shape.h).
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local c = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return -2 - c
end
return redis.call('pttl', KEYS[1])
