-- This proxy's permit ledger of one semaphore (sem_track.c), read after a
-- change of slot owners: {conn, permits, conn, permits, ...}.
-- KEYS[1] {name}:lp-permits:<proxy-uuid>
return redis.call('hgetall', KEYS[1])
