-- Redisson's RLock acquire (tryLockInnerAsync), refusing a read-write
-- lock's hash. Fragments before: _lock_refuse_rw.lua ("free").
-- KEYS[1] name
-- ARGV[1] lease ms, ARGV[2] owner
-- Returns {1, count} when acquired (or re-entered), else {0, PTTL}.
if free or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    local c = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return {1, c}
end
return {0, redis.call('pttl', KEYS[1])}
