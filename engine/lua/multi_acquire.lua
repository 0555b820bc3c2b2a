-- MULTILOCK's all-or-nothing acquire over names of one slot: Redisson's
-- RLock acquire (tryLockInnerAsync) on every key, but only once every key
-- is free or already the owner's; a read-write lock's hash is refused.
-- Nothing is written unless everything is taken.
-- KEYS[1..N] names (distinct)
-- ARGV[1] lease ms, ARGV[2] owner
-- Returns {1, count1, ..., countN} when every name was acquired (or
-- re-entered), else {0, PTTL, i}: KEYS[i] is the first one held by another.
for i = 1, #KEYS do
    if redis.call('exists', KEYS[i]) == 1 then
        if redis.call('hexists', KEYS[i], 'mode') == 1 then
            return redis.error_reply('WRONGTYPE the name holds a read-write lock (use RLOCK/WLOCK)')
        end
        if redis.call('hexists', KEYS[i], ARGV[2]) == 0 then
            return {0, redis.call('pttl', KEYS[i]), i}
        end
    end
end
local r = {1}
for i = 1, #KEYS do
    r[i + 1] = redis.call('hincrby', KEYS[i], ARGV[2], 1)
    redis.call('pexpire', KEYS[i], ARGV[1])
end
return r
