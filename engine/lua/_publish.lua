-- Fragment: the publish command, PUBLISH or SPUBLISH (Redis Cluster in
-- sharded pub/sub mode), which the proxy appends as the last ARGV of every
-- script that publishes (Redisson passes it the same way, spec 13.3).
local publish = ARGV[#ARGV]
