-- A semaphore this proxy keeps a permit ledger of (sem_reap.c), so that
-- another proxy can give the permits back if this one dies. The proxy
-- joins the registry, alive (if its liveness key is not set yet, this
-- sets it: a proxy is never found dead before its first renewal).
-- KEYS[1] {lp-proxies}:sems:<uuid>, KEYS[2] {lp-proxies}:all,
-- KEYS[3] {lp-proxies}:live:<uuid>; ARGV[1] the semaphore's name,
-- ARGV[2] uuid, ARGV[3] ttl ms
redis.call('set', KEYS[3], '1', 'px', ARGV[3], 'nx')
redis.call('sadd', KEYS[2], ARGV[2])
return redis.call('sadd', KEYS[1], ARGV[1])
