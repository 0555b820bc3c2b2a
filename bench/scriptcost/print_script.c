/* lockproxy-print-script NAME: prints the text of one of the proxy's lock
 * scripts (as embedded from engine/lua/ at build time) for
 * bench/script_cost.py, which runs them in a Redis under callgrind. */
#include <stdio.h>
#include <string.h>

#include "engine/lua_scripts.h"

static const struct px_lua *const scripts[] = {
    &px_lua_lock_acquire,
    &px_lua_lock_unlock,
    &px_lua_lock_batch,
};

int main(int argc, char **argv)
{
    size_t i;

    for (i = 0; argc == 2 && i < sizeof(scripts) / sizeof(scripts[0]); i++) {
        if (strcmp(argv[1], scripts[i]->name) == 0) {
            fputs(scripts[i]->text, stdout);
            return 0;
        }
    }
    fprintf(stderr, "usage: lockproxy-print-script lock_acquire|lock_unlock|lock_batch\n");
    return 2;
}
