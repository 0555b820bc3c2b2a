-- After a change of slot owners (sem_track.c): the records in this
-- proxy's permit ledger of connections that hold nothing here any more (a
-- release or a return the old master acknowledged and the new one never
-- saw) go back to the count, and are cleared. The records of connections
-- that still have a taker (ARGV) are theirs to settle (on release, on
-- close). Fragments before: _publish.lua, _object_semaphore.lua,
-- _count_check.lua.
-- KEYS[1] name, KEYS[2] redisson_sc:{name}, KEYS[3] {name}:lp-permits:<uuid>
-- ARGV[1..#ARGV-1] the connections to skip; last ARGV: the publish command
-- Returns {connections, permits} given back (only to a semaphore that
-- exists; the records go in any case).
local skip = {}
for i = 1, #ARGV - 1 do
    skip[ARGV[i]] = true
end
local all = redis.call('hgetall', KEYS[3])
local conns, n = 0, 0
for i = 1, #all, 2 do
    if not skip[all[i]] then
        redis.call('hdel', KEYS[3], all[i])
        conns = conns + 1
        n = n + tonumber(all[i + 1])
    end
end
if n > 0 and cur then
    local v = redis.call('incrby', KEYS[1], n)
    if v > 0 then
        redis.call(publish, KEYS[2], v)
    end
else
    n = 0
end
return {conns, n}
