-- Fragment: a read-write lock's hash is refused (its read owner fields
-- look like ours).
if redis.call('hexists', KEYS[1], 'mode') == 1 then
    return redis.error_reply('WRONGTYPE the name holds a read-write lock (use RLOCK/WLOCK)')
end
