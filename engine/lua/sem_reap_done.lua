-- A dead proxy's semaphore whose permits went back (sem_reap.c) leaves
-- its registry. KEYS[1] {lp-proxies}:sems:<uuid>; ARGV[1] the name
return redis.call('srem', KEYS[1], ARGV[1])
