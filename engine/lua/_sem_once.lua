-- Fragment: SEM.RELEASE's numbering (sem.c). KEYS[4]
-- {name}:lp-released:<uuid>: per connection (ARGV[3]) of that proxy, the
-- number (ARGV[5]) of its last release this master ran. The proxy numbers
-- a connection's releases in the order it sends them, and sends one it
-- carries out (Redis did not answer it) before any later one of that
-- connection and name; so a number at or below the one recorded ran
-- already (a resend after a lost reply, or the first send overtaken by
-- its resend): {3, count, 0, 0}, nothing added again. The hash lives
-- 120 s past its last write, twice the 60 s the proxy resends for.
-- Needs "cur" (_count_check.lua).
local last = tonumber(redis.call('hget', KEYS[4], ARGV[3]) or '0')
if last >= tonumber(ARGV[5]) then
    return {3, tonumber(cur or '0'), 0, 0}
end
redis.call('hset', KEYS[4], ARGV[3], ARGV[5])
redis.call('pexpire', KEYS[4], 120000)
