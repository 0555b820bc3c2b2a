-- Unlock and local hand-off in one step (unlock.c): when the caller's last
-- hold goes, the lock goes straight to a waiter of this proxy (a fresh
-- hold of 1 with its lease), without a publish: nobody else could have
-- taken it. Fragments before: _lock_mode_owner.lua ("v").
-- KEYS[1] name
-- ARGV[1] lease ms, ARGV[2] owner, ARGV[3] next lease ms, ARGV[4] next owner
-- Returns nil (not held by the owner), 0 (still held), 2 (released and
-- granted to the next owner).
if not v[2] then
    return nil
end
local c = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if c > 0 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 0
end
redis.call('del', KEYS[1])
redis.call('hincrby', KEYS[1], ARGV[4], 1)
redis.call('pexpire', KEYS[1], ARGV[3])
return 2
