-- Fragment: also refuses a permit set ({name}:timeout, KEYS[2]) that is
-- not a ZSET.
local tt = redis.call('type', KEYS[2])['ok']
if tt ~= 'none' and tt ~= 'zset' then
    return redis.error_reply('WRONGTYPE the permit set of the name holds a ' .. tt .. ', not a zset')
end
