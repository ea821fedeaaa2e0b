/* ctor_probe.h - what ctor_probe.c's constructor found (ctor_main.c). */
#ifndef FS_CTOR_PROBE_H
#define FS_CTOR_PROBE_H

#include <stdbool.h>

struct ctor_probe {
    bool ran;         /* the constructor ran */
    bool lookups;     /* dlsym and dlvsym, RTLD_NEXT and RTLD_DEFAULT, answered */
    bool allocated;   /* cuMemAlloc_v2 and cuMemFree_v2 succeeded */
    bool hooked;      /* the cuMemAlloc_v2 it got is the shim's */
    bool shim_before; /* the shim's allocator did not exist, or had served nothing */
};

const struct ctor_probe *fs_ctor_probe_result(void);

#endif /* FS_CTOR_PROBE_H */
