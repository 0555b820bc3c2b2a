-- This proxy is alive (sem_reap.c): its liveness key is set for ARGV[2]
-- ms and its uuid is in the registry of proxies with permit ledgers.
-- Returns 1 when another proxy found it dead meanwhile and gave its
-- permits back (its records are gone: its clients' permits were lost), else 0.
-- KEYS[1] {lp-proxies}:live:<uuid>, KEYS[2] {lp-proxies}:all,
-- KEYS[3] {lp-proxies}:reaped:<uuid>; ARGV[1] uuid, ARGV[2] ttl ms
local reaped = redis.call('exists', KEYS[3])
redis.call('set', KEYS[1], '1', 'px', ARGV[2])
redis.call('sadd', KEYS[2], ARGV[1])
if reaped == 1 then
    redis.call('del', KEYS[3])
end
return reaped
