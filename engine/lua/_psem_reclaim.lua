-- Fragment: lazy reclaim, as Redisson does on every use: permits whose
-- lease ended (score <= now, ARGV[1]) go back, and the new count is
-- published (KEYS[3]); "cur" follows. Needs the local publish and "cur".
local gone = redis.call('zremrangebyscore', KEYS[2], 0, ARGV[1])
if gone > 0 then
    local v = redis.call('incrby', KEYS[1], gone)
    if v > 0 then
        redis.call(publish, KEYS[3], v)
    end
    cur = tostring(v)
end
