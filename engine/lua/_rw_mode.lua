-- Fragment: "mode" = the read-write lock's mode (false when the name is
-- free); a hash without one is another lock kind, refused.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == false and redis.call('exists', KEYS[1]) == 1 then
    return redis.error_reply(
        'WRONGTYPE the name holds a lock that is not a read-write lock (use LOCK/FAIRLOCK)')
end
if mode and mode ~= 'read' and mode ~= 'write' then
    return redis.error_reply('WRONGTYPE the name holds a hash whose mode is neither read nor write')
end
