-- Fragment: names the object in _count_check.lua's errors.
local object = 'semaphore'
