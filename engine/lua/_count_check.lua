-- Fragment for scripts on a STRING count at KEYS[1] (semaphore, latch):
-- refuses any other type, or a string that is not an integer, with
-- WRONGTYPE before anything is written, and leaves the value (or false)
-- in "cur". Needs "object" (_object_*.lua) for the error text.
local t = redis.call('type', KEYS[1])['ok']
if t ~= 'none' and t ~= 'string' then
    return redis.error_reply('WRONGTYPE the name holds a ' .. t .. ', not a ' .. object)
end
local cur = redis.call('get', KEYS[1])
if cur and not string.match(cur, '^%-?%d+$') then
    return redis.error_reply('WRONGTYPE the name holds a string that is not a count, not a ' .. object)
end
