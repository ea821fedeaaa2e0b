/* lifetime.c - runs the library's lifetime hooks (lifetime.h): one
 * constructor, one pthread_atfork, one destructor for the whole library. */
#include "lifetime.h"

#include <pthread.h>
#include <stddef.h>

/* the linker's bounds of the fs_lifetime section of this library */
extern const fs_lifetime_hook __start_fs_lifetime[] __attribute__((visibility("hidden")));
extern const fs_lifetime_hook __stop_fs_lifetime[] __attribute__((visibility("hidden")));

#define MAX_HOOKS 32

static const fs_lifetime_hook *hooks[MAX_HOOKS];
static size_t nhooks;

/* The hooks by order, once, before any is run (insertion sort: a dozen) */
static void gather(void)
{
    for (const fs_lifetime_hook *h = __start_fs_lifetime; h < __stop_fs_lifetime; h++) {
        if (nhooks == MAX_HOOKS) break; /* lifetime.h's enum has far fewer */
        size_t i = nhooks++;
        while (i > 0 && hooks[i - 1]->order > h->order) {
            hooks[i] = hooks[i - 1];
            i--;
        }
        hooks[i] = h;
    }
}

static void fork_prepare(void)
{
    for (size_t i = nhooks; i-- > 0;)
        if (hooks[i]->fork_prepare) hooks[i]->fork_prepare();
}

static void fork_parent(void)
{
    for (size_t i = 0; i < nhooks; i++)
        if (hooks[i]->fork_parent) hooks[i]->fork_parent();
}

static void fork_child(void)
{
    for (size_t i = 0; i < nhooks; i++)
        if (hooks[i]->fork_child) hooks[i]->fork_child();
}

/* Priority 101: before any other constructor of this library (there are
 * none), and as early among the process's as a library's can be. */
__attribute__((constructor(101))) static void lifetime_init(void)
{
    gather();
    for (size_t i = 0; i < nhooks; i++)
        if (hooks[i]->init) hooks[i]->init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

void fs_lifetime_started(struct fs_allocator *a, int ndev)
{
    for (size_t i = 0; i < nhooks; i++)
        if (hooks[i]->started) hooks[i]->started(a, ndev);
}

__attribute__((destructor)) static void lifetime_exit(void)
{
    for (size_t i = nhooks; i-- > 0;)
        if (hooks[i]->exit) hooks[i]->exit();
}
