/* fsdpshim_loader.h - reaching the public API (fsdpshim.h) of a preloaded
 * libfsdpshim.so without linking it (docs/api.md).
 *
 * The shim works only when it is preloaded (LD_PRELOAD, or `fsdpshim run`):
 * a program linked with -lfsdpshim gets its CUDA calls bound to whichever
 * library comes first, and the shim then reports itself inactive. This
 * header lets a program be built without the shim and run with or without
 * it: fsdpshim_load() fills a table with the preloaded library's functions,
 * or, for each one that is not in the process, with a stand-in that does
 * nothing and returns FSDPSHIM_ERR_INACTIVE, as the shim itself answers
 * while inactive. Header only; needs dlopen/dlsym (-ldl before glibc 2.34).
 *
 *     fsdpshim_api fs;
 *     fsdpshim_load(&fs);            // once, e.g. at start-up
 *     if (fs.active() == FSDPSHIM_OK) fs.set_stream(stream);
 *
 * The table is plain data: fill it once, then any thread may use it. */
#ifndef FSDPSHIM_LOADER_H
#define FSDPSHIM_LOADER_H

#include "fsdpshim.h"

#include <dlfcn.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fsdpshim_api {
    int (*active)(void);
    int (*record_stream)(void *ptr, void *stream);
    int (*set_stream)(void *stream);
    int (*get_stream)(void **stream);
    int (*empty_cache)(int device);
    int (*stat)(const char *name, int device, int64_t *value);
    int (*reset_peak_stats)(int device);
    int (*memory_summary)(int device, char *buf, size_t len, size_t *needed);
    int (*annotation_push)(const char *name);
    int (*annotation_pop)(void);
    int (*snapshot)(const char *label);
    int (*trace_flush)(void);
} fsdpshim_api;

/* The stand-ins, one per signature: arguments are left untouched. */
static inline int fsdpshim_inactive_v(void)
{
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_pp(void *a, void *b)
{
    (void)a, (void)b;
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_p(void *a)
{
    (void)a;
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_pout(void **a)
{
    (void)a;
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_i(int a)
{
    (void)a;
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_stat(const char *a, int b, int64_t *c)
{
    (void)a, (void)b, (void)c;
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_summary(int a, char *b, size_t c, size_t *d)
{
    (void)a, (void)b, (void)c, (void)d;
    return FSDPSHIM_ERR_INACTIVE;
}
static inline int fsdpshim_inactive_s(const char *a)
{
    (void)a;
    return FSDPSHIM_ERR_INACTIVE;
}

/* Stores the address of `name` in the function pointer at `slot` when the
 * global scope has it; returns whether it did. */
static inline int fsdpshim_load_symbol(void *self, const char *name, void *slot)
{
    void *sym = self ? dlsym(self, name) : NULL;

    if (sym) memcpy(slot, &sym, sizeof sym);
    return sym != NULL;
}

/* Fills *api. Returns FSDPSHIM_OK when a libfsdpshim.so is in the
 * program's global scope (preloaded), else FSDPSHIM_ERR_INACTIVE with every
 * entry a stand-in. FSDPSHIM_OK says the library is there, not that it
 * manages memory: api->active() says that. dlopen(NULL) names the program's
 * global scope, where the preloaded library is (and a library dlopen'ed
 * with RTLD_LOCAL is not); the lookup loads nothing. */
static inline int fsdpshim_load(fsdpshim_api *api)
{
    const fsdpshim_api standins = {
        fsdpshim_inactive_v, fsdpshim_inactive_pp,   fsdpshim_inactive_p, fsdpshim_inactive_pout,
        fsdpshim_inactive_i, fsdpshim_inactive_stat, fsdpshim_inactive_i, fsdpshim_inactive_summary,
        fsdpshim_inactive_s, fsdpshim_inactive_v,    fsdpshim_inactive_s, fsdpshim_inactive_v,
    };
    void *self = dlopen(NULL, RTLD_LAZY);
    int found = 0;

    *api = standins;
    found |= fsdpshim_load_symbol(self, "fsdpshim_active", &api->active);
    found |= fsdpshim_load_symbol(self, "fsdpshim_record_stream", &api->record_stream);
    found |= fsdpshim_load_symbol(self, "fsdpshim_set_stream", &api->set_stream);
    found |= fsdpshim_load_symbol(self, "fsdpshim_get_stream", &api->get_stream);
    found |= fsdpshim_load_symbol(self, "fsdpshim_empty_cache", &api->empty_cache);
    found |= fsdpshim_load_symbol(self, "fsdpshim_stat", &api->stat);
    found |= fsdpshim_load_symbol(self, "fsdpshim_reset_peak_stats", &api->reset_peak_stats);
    found |= fsdpshim_load_symbol(self, "fsdpshim_memory_summary", &api->memory_summary);
    found |= fsdpshim_load_symbol(self, "fsdpshim_annotation_push", &api->annotation_push);
    found |= fsdpshim_load_symbol(self, "fsdpshim_annotation_pop", &api->annotation_pop);
    found |= fsdpshim_load_symbol(self, "fsdpshim_snapshot", &api->snapshot);
    found |= fsdpshim_load_symbol(self, "fsdpshim_trace_flush", &api->trace_flush);
    if (self) dlclose(self);
    return found ? FSDPSHIM_OK : FSDPSHIM_ERR_INACTIVE;
}

#ifdef __cplusplus
}
#endif

#endif /* FSDPSHIM_LOADER_H */
