/* next_a.c - the first of two libraries that define fs_next_probe; it asks
 * for the next definition after its own, as interposers do (rtld_next.c). */
#include <dlfcn.h>

/* Touched after each lookup, so that the lookup is not a tail call: that
 * would make the program, not this library, dlsym's caller. */
static volatile int lookups;

__attribute__((visibility("default"))) int fs_next_probe(void)
{
    return 'a';
}

/* dlsym(RTLD_NEXT) from here: next_b's definition, whatever comes before. */
__attribute__((visibility("default"))) void *fs_next_from_a(const char *name)
{
    void *fn = dlsym(RTLD_NEXT, name);

    lookups++;
    return fn;
}

__attribute__((visibility("default"))) void *fs_next_versioned_from_a(const char *name,
                                                                      const char *version)
{
    void *fn = dlvsym(RTLD_NEXT, name, version);

    lookups++;
    return fn;
}
