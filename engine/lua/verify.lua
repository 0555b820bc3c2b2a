-- Batched check that holds still exist, changing nothing (after a
-- failover or a slot migration: watchdog.c). Works for every lock kind:
-- the owner field of a read hold, a write hold ("<owner>:write") and an
-- RLock hold are all fields of the hash at the name. Every key of a batch
-- is in one cluster slot.
-- KEYS[1..N] names
-- ARGV[1] unused (the shape of renew.lua), ARGV[2..N+1] owners
-- Returns {1 held | 0 not held, ...} in KEYS order.
local r = {}
for i = 1, #KEYS do
    local ok = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
    if ok == 1 then
        r[i] = 1
    else
        r[i] = 0
    end
end
return r
