-- Fragment: "0" to the fair queue head's own channel,
-- redisson_lock__channel:{name}:<head> (ARGV[3] .. ':' .. head), with
-- KEYS[2] the queue. Needs the local publish.
local function fair_wake_head()
    local h = redis.call('lindex', KEYS[2], 0)
    if h then
        redis.call(publish, ARGV[3] .. ':' .. h, '0')
    end
end
