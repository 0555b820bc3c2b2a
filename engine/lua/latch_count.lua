-- RCountDownLatch getCount. Fragments before: _object_latch.lua,
-- _count_check.lua.
-- KEYS[1] name
-- Returns the count (0 when open or not set).
return tonumber(cur or '0')
