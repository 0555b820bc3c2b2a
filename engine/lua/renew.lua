-- Batched watchdog renewal of RLock-layout holds (plain, fenced, fair and
-- write locks): extend only where the owner field is still ours, never
-- blindly. pcall keeps one odd key from failing the batch. Every key of a
-- batch is in one cluster slot (watchdog.c groups them).
-- KEYS[1..N] names
-- ARGV[1] lease ms, ARGV[2..N+1] owners (ARGV[i + 1] for KEYS[i])
-- Returns {1 renewed | 0 not held, ...} in KEYS order.
local r = {}
for i = 1, #KEYS do
    local ok = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if ok == 1 then
        redis.call('pexpire', KEYS[i], ARGV[1])
        r[i] = 1
    else
        r[i] = 0
    end
end
return r
