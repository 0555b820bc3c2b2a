/* The script sets of every module, the publish command, and the naming
 * rules of side keys and channels; see scripts.h. The scripts themselves
 * are in lua/. */
#include "engine/scripts.h"

#include <errno.h>
#include <string.h>

#include "common/compiler.h"
#include "common/util.h"
#include "engine/engine.h"
#include "engine/lua_scripts.h"
#include "engine/repl.h"
#include "pool/pool.h"

static const struct px_lua *const lock_scripts[PX_SCRIPT_COUNT] = {
    &px_lua_settle,
    &px_lua_renew,
    &px_lua_info,
    &px_lua_verify,
};

/* Its base is 0 (it comes first). */
static const struct px_script_set lock_script_set = {lock_scripts, PX_SCRIPT_COUNT,
                                                     LK_SCRIPTS_ENGINE};

void px_scripts_init(struct lk_engine *eng)
{
    eng->nscript_sets = 0;
    px_scripts_register(eng, &lock_script_set); /* first: its ids are base 0 */
}

void px_scripts_register(struct lk_engine *eng, const struct px_script_set *set)
{
    LP_BUG_ON(eng->nscript_sets >= LK_SCRIPT_SETS_MAX);
    eng->script_sets[eng->nscript_sets++] = set;
}

/* Appends the batch runner to table (n scripts) and marks its ops, found
 * by their text. Returns the new count. */
static size_t scripts_add_runner(struct lk_engine *eng, size_t n)
{
    struct pool_script *table = eng->script_table;
    size_t i, k;

    LP_BUG_ON(n >= LK_SCRIPTS_MAX);
    table[n].name = px_lua_lock_batch.name;
    table[n].text = px_lua_lock_batch.text;
    table[n].runner = true;
    eng->script_names[n] = px_lua_lock_batch.name;
    for (i = 0; i < px_lua_lock_batch_nops; i++) {
        const struct px_lua_op *op = &px_lua_lock_batch_ops[i];

        for (k = 0; k < n && table[k].text != op->script->text; k++)
            ;
        LP_BUG_ON(k == n);
        table[k].batch_op = op->op;
        table[k].batch_keys = op->keys;
        table[k].batch_args = op->args;
    }
    return n + 1;
}

size_t px_scripts_build(struct lk_engine *eng, const struct pool_script **out)
{
    struct pool_script *table = eng->script_table;
    size_t n = 0, i, k;

    memset(table, 0, sizeof(eng->script_table));
    for (i = 0; i < eng->nscript_sets; i++) {
        const struct px_script_set *set = eng->script_sets[i];

        LP_BUG_ON(n + set->n > LK_SCRIPTS_MAX);
        LP_BUG_ON(set->slot >= LK_SCRIPT_SLOTS);
        eng->script_bases[set->slot] = (unsigned)n;
        for (k = 0; k < set->n; k++) {
            table[n].name = set->scripts[k]->name;
            table[n].text = set->scripts[k]->text;
            eng->script_writes[n] = set->scripts[k]->writes;
            eng->script_names[n] = set->scripts[k]->name;
            eng->script_publishes[n++] = set->scripts[k]->publishes;
        }
    }
    n = scripts_add_runner(eng, n);
    *out = table;
    return n;
}

/* Through px_repl_eval() when the script writes and --sync-replicas is on. */
static int script_send(struct lk_engine *eng, uint64_t hint, unsigned script, int numkeys, int argc,
                       const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{

    if (eng->cfg.sync_replicas > 0 && script < LK_SCRIPTS_MAX && eng->script_writes[script])
        return px_repl_eval(eng, hint, script, eng->script_names[script], numkeys, argc, argv, lens,
                            cb, arg);
    return pool_eval(eng->pool, hint, script, numkeys, argc, argv, lens, cb, arg);
}

int px_script_eval(struct lk_engine *eng, uint64_t hint, unsigned script, int numkeys, int argc,
                   const char *const *argv, const size_t *lens, pool_reply_fn *cb, void *arg)
{
    const char *av[PX_SCRIPT_PUBLISH_ARGS + 1];
    size_t lv[PX_SCRIPT_PUBLISH_ARGS + 1];
    bool sharded;

    if (script >= LK_SCRIPTS_MAX || !eng->script_publishes[script])
        return script_send(eng, hint, script, numkeys, argc, argv, lens, cb, arg);
    LP_BUG_ON(argc < 0 || argc > (int)PX_SCRIPT_PUBLISH_ARGS);
    memcpy(av, argv, (size_t)argc * sizeof(*av));
    memcpy(lv, lens, (size_t)argc * sizeof(*lv));
    sharded = pool_pubsub_sharded(eng->pool);
    av[argc] = sharded ? "spublish" : "publish";
    lv[argc] = sharded ? 8 : 7;
    return script_send(eng, hint, script, numkeys, argc + 1, av, lv, cb, arg);
}

size_t px_channel_name(char *dst, size_t cap, const char *prefix, const char *name, size_t len)
{
    size_t plen = strlen(prefix);
    int braces = memchr(name, '{', len) == NULL;
    size_t need = plen + len + (braces ? 2 : 0);

    if (need + 1 > cap)
        return 0;
    memcpy(dst, prefix, plen);
    if (braces)
        dst[plen++] = '{';
    memcpy(dst + plen, name, len);
    plen += len;
    if (braces)
        dst[plen++] = '}';
    dst[plen] = '\0';
    return plen;
}

/* The slot of prefix + "{" name "}" (braced) or of px_channel_name(). The
 * prefixes carry no braces, so the prefix never changes the hash tag: one
 * representative prefix stands for every side key and channel. */
static uint16_t side_slot(const char *name, size_t len, enum px_name_rule rule)
{
    char buf[PX_CHANNEL_MAX];
    size_t n;

    if (rule == PX_NAME_BRACED) {
        buf[0] = 'x';
        buf[1] = '{';
        memcpy(buf + 2, name, len);
        buf[len + 2] = '}';
        return pool_slot(buf, len + 3);
    }
    n = px_channel_name(buf, sizeof(buf), "x", name, len);
    return pool_slot(buf, n);
}

bool px_name_slot_ok(const struct lk_engine *eng, const char *name, size_t len,
                     enum px_name_rule rule)
{
    if (!pool_is_cluster(eng->pool) || len > PX_NAME_MAX)
        return true;
    return side_slot(name, len, rule) == pool_slot(name, len);
}
