# The Lua scripts lockproxy runs in Redis, one lp_lua() line each: the
# script's name (C symbol px_lua_<name>) and its fragments in order, each a
# file of this folder without ".lua". A fragment whose name starts with "_"
# is shared by several scripts; every fragment is whole Lua statements.
# cmake/lua_embed.cmake joins them at build time into one C string per
# script (the text is the files' text, so its SHA1 only changes when they
# do). A script that publishes starts with _publish (the proxy appends the
# publish command, PUBLISH or SPUBLISH, as its last ARGV).
lp_lua(settle _publish settle)
lp_lua(renew renew)
lp_lua(info info)
lp_lua(verify verify)
lp_lua(lock_acquire _lock_refuse_rw lock_acquire)
lp_lua(lock_acquire_fenced _lock_refuse_rw lock_acquire_fenced)
lp_lua(lock_unlock _publish _lock_mode_owner lock_unlock)
lp_lua(lock_force _publish _fair_cleanup lock_force)
lp_lua(lock_unlock_grant _lock_mode_owner lock_unlock_grant)
lp_lua(rw_read_acquire _rw_mode rw_read_acquire)
lp_lua(rw_write_acquire _rw_mode rw_write_acquire)
lp_lua(rw_read_unlock _publish _rw_mode rw_read_unlock _rw_settle)
lp_lua(rw_write_unlock _publish _rw_mode rw_write_unlock)
lp_lua(rw_read_settle _publish rw_read_settle _rw_settle)
lp_lua(rw_write_settle _publish rw_write_settle)
lp_lua(rw_read_renew rw_read_renew)
lp_lua(fair_acquire _fair_mode _fair_cleanup fair_acquire)
lp_lua(fair_unlock _publish _fair_mode _fair_cleanup _fair_wake_head fair_unlock)
lp_lua(fair_settle _publish _fair_cleanup _fair_wake_head fair_settle)
lp_lua(sem_tryset _publish _object_semaphore _count_check sem_tryset)
lp_lua(sem_add _publish _object_semaphore _count_check sem_add)
lp_lua(sem_acquire _object_semaphore _count_check sem_acquire)
lp_lua(sem_release _publish _object_semaphore _count_check _sem_once sem_release)
lp_lua(sem_available _object_semaphore _count_check sem_available)
lp_lua(sem_drain _object_semaphore _count_check sem_drain)
lp_lua(sem_return _publish _object_semaphore _count_check sem_return)
lp_lua(sem_ledger sem_ledger)
lp_lua(sem_alive sem_alive)
lp_lua(sem_register sem_register)
lp_lua(sem_reap_find sem_reap_find)
lp_lua(sem_reap _publish sem_reap)
lp_lua(sem_reap_done sem_reap_done)
lp_lua(psem_tryset _publish _object_semaphore _count_check _psem_check psem_tryset)
lp_lua(psem_acquire _publish _object_semaphore _count_check _psem_check _psem_reclaim psem_acquire)
lp_lua(psem_release _publish _object_semaphore _count_check _psem_check psem_release)
lp_lua(psem_available _publish _object_semaphore _count_check _psem_check _psem_reclaim
       psem_available)
lp_lua(latch_tryset _publish _object_latch _count_check latch_tryset)
lp_lua(latch_countdown _publish _object_latch _count_check latch_countdown)
lp_lua(latch_count _object_latch _count_check latch_count)
lp_lua(multi_acquire multi_acquire)
lp_lua(multi_unlock _publish multi_unlock)
# The batch runner (pool/batch.c): the plain lock's acquire and unlock,
# the hot path, run several to a script call. Each: script, KEYS, ARGV.
lp_lua_batch(lock_batch lock_acquire 1 2 lock_unlock 2 3)
