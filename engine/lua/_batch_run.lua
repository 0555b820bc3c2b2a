-- The batch runner's loop (pool/batch.c): runs several requests' scripts
-- in one call, each as if it were called alone. Fragments before: the
-- generated table "ops", by op number (a string, as it arrives):
-- {function(k, a), #KEYS, #ARGV}, the function reading its keys from
-- KEYS[k + 1] and its arguments from ARGV[a + 1] on.
-- KEYS: every request's keys, request after request.
-- ARGV: per request its op number, then its arguments.
-- Returns one reply per request, in order: what its script returned (nil
-- as false, so the array has no hole), or its error (pcall: a failing
-- request does not stop the others; what it wrote stays, as it would).
-- The runner is the only script that uses pcall and string methods.
local out, k, a, n = {}, 0, 1, #ARGV
while a <= n do
    local op = ops[ARGV[a]]
    local ok, r = pcall(op[1], k, a)
    if not ok and type(r) ~= 'table' then
        -- a failed redis.call raises its error's text ("WRONGTYPE ..."),
        -- a Lua error its message: keep a code, else ERR as Redis does
        r = tostring(r)
        if not r:match('^%u+ ') then
            r = 'ERR ' .. r
        end
        r = redis.error_reply(r)
    elseif r == nil then
        r = false
    end
    out[#out + 1] = r
    k, a = k + op[2], a + 1 + op[3]
end
return out
