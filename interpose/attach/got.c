/* got.c - `fsdpshim attach` without CUPTI: the hooked entry points of every
 * loaded object redirected, through its GOT/PLT slots, to trace-only
 * functions (docs/attach.md).
 *
 * Every R_*_JUMP_SLOT and R_*_GLOB_DAT slot of each object (../slots.h)
 * that names an entry point of the hook table (hooks.h) with a traced
 * function is written
 * with that function's address, and its old value kept so that detach
 * writes it back (traced.c has the functions). That covers the CUDA
 * runtime's memory and stream calls, the driver's memory calls where an
 * object links them by symbol, NCCL's ncclMemAlloc/ncclMemFree, and the ways
 * to look the driver up: dlsym, dlvsym, cuGetProcAddress and the runtime's
 * cudaGetDriverEntryPoint, whose answers for the driver's memory calls are
 * then the traced functions (driver/cuda_driver.c), so a program that looks
 * them up after the attach is traced there too. The CUDA runtime, driver and
 * CUPTI (calling themselves) and the shim are left alone; of NCCL only the
 * lookups are redirected, which is how NCCL reaches the driver: its runtime
 * calls made for ncclMemAlloc would otherwise be written twice. Slots in a
 * RELRO segment are made writable for the write and read-only again.
 *
 * Objects loaded after the attach: a thread of the shim's own watches the
 * loader's count of loaded objects (dl_iterate_phdr's dlpi_adds) every 50 ms
 * and patches what is new. Wrapping dlopen instead would change its answers:
 * glibc reads dlopen's caller (its return address) for the caller's RUNPATH,
 * $ORIGIN and namespace, which a wrapper would make the shim's. */
#include "got.h"

#include "../core/hooks.h"
#include "../core/shim.h"
#include "../core/slots.h"
#include "passive.h"

#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the slots ------------------------------------------------------------------ */

typedef struct patched {
    void **slot;
    void *old;
    uintptr_t object; /* its object's load base: not written back once unloaded */
    bool relro;
} patched;

static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;
static patched *slots;
static size_t nslots, slots_cap;
static atomic_bool attached;
static unsigned long long seen_adds;
static pthread_t watcher;
static bool watching; /* the watcher was started: detach joins it */

/* Which of an object's slots are redirected. */
enum object_kind { OBJECT_ALL, OBJECT_LOOKUPS, OBJECT_NONE };

static bool named(const char *path, const char *prefix)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return !strncmp(base, prefix, strlen(prefix));
}

static enum object_kind object_kind(const char *path)
{
    static const char *const left_alone[] = {"libcudart.so", "libcuda.so", "libcupti.so",
                                             "libfsdpshim.so"};
    for (size_t i = 0; i < sizeof left_alone / sizeof left_alone[0]; i++)
        if (named(path, left_alone[i])) return OBJECT_NONE;
    if (strstr(path, "linux-vdso")) return OBJECT_NONE;
    return named(path, "libnccl.so") ? OBJECT_LOOKUPS : OBJECT_ALL;
}

/* The traced function for a slot named `name` in an object of `kind`, or
 * NULL. */
static void *traced_for(const char *name, enum object_kind kind)
{
    for (int i = 0; i < FS_HOOK_COUNT; i++) {
        const struct fs_hook *h = &fs_hooks[i];
        void *traced = fs_hook_handed_out((enum fs_hook_id)i, true);
        if (!traced || strcmp(name, h->name)) continue;
        if (kind == OBJECT_LOOKUPS && !(h->flags & FS_HOOK_LOOKUP)) return NULL;
        return fs_hook_real((enum fs_hook_id)i) ? traced : NULL;
    }
    return NULL;
}

/* Under patch_lock. False when there is no room to remember it: then the
 * slot is not written. */
static bool remember(patched p)
{
    if (nslots == slots_cap) {
        size_t cap = slots_cap ? slots_cap * 2 : 64;
        patched *n = realloc(slots, cap * sizeof *n);
        if (!n) return false;
        slots = n;
        slots_cap = cap;
    }
    slots[nslots++] = p;
    return true;
}

/* The object whose slots are being patched. */
typedef struct patching {
    enum object_kind kind;
    uintptr_t base;
} patching;

/* One slot of the object *ctx (a patching). Under patch_lock. */
static void patch_slot(void *ctx, const char *name, void **slot, bool relro)
{
    const patching *p = ctx;
    void *traced = traced_for(name, p->kind);
    if (!traced) return;
    void *old = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (old == traced) return; /* patched already */
    if (remember((patched){slot, old, p->base, relro})) fs_slot_write(slot, traced, relro);
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    patching p = {.base = info->dlpi_addr};
    (void)size;
    (void)arg;
    if (!info->dlpi_name || (p.kind = object_kind(info->dlpi_name)) == OBJECT_NONE) return 0;
    fs_slots_each(info, patch_slot, &p);
    return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

/* The real functions of every API's entries, as far as their libraries are
 * loaded now; how many entries have one. */
static int resolve_all(void)
{
    return fs_hooks_resolve(FS_API_RUNTIME) + fs_hooks_resolve(FS_API_DRIVER) +
           fs_hooks_resolve(FS_API_NCCL) + fs_hooks_resolve(FS_API_LOADER);
}

/* The real functions first, outside dl_iterate_phdr (finding them may
 * dlopen): a library loaded since the last look brings its entries. */
static void patch_all(void)
{
    pthread_mutex_lock(&patch_lock);
    resolve_all();
    dl_iterate_phdr(count_adds, &seen_adds);
    dl_iterate_phdr(patch_object, NULL);
    pthread_mutex_unlock(&patch_lock);
}

/* Patches objects loaded since the last look, every 50 ms. */
static void *watch_loads(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "fsdpshim-got");
    while (atomic_load(&attached)) {
        unsigned long long adds = 0;
        usleep(50000);
        dl_iterate_phdr(count_adds, &adds);
        if (adds != seen_adds && atomic_load(&attached)) patch_all();
    }
    return NULL;
}

enum fs_got_status fs_got_attach(int level, unsigned frames, const char *path)
{
    sigset_t all, old;
    int found;

    if (atomic_load(&attached)) return FS_GOT_TRACING;
    found = resolve_all();
    if (!fs_hook_real(FS_HOOK_CUDA_MALLOC) && !fs_hook_real(FS_HOOK_CU_MEM_ALLOC)) {
        fs_log(FS_LOG_WARN, "fsdpshim attach: no CUDA runtime (libcudart.so) or driver "
                            "(libcuda.so) in this process");
        return FS_GOT_NO_CUDA;
    }
    if (!fs_passive_start(level, frames, path, "fsdpshim attach, GOT")) return FS_GOT_NO_TRACE;
    atomic_store(&attached, true);
    fs_hooks_set_tracing(true); /* before a slot can lead a lookup to the shim */
    patch_all();
    fs_log(FS_LOG_INFO, "fsdpshim attach: %zu slots of %d entry points redirected", nslots, found);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread takes none of the program's signals */
    watching = pthread_create(&watcher, NULL, watch_loads, NULL) == 0;
    if (!watching)
        fs_log(FS_LOG_WARN, "fsdpshim attach: objects loaded from now on are not traced");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return FS_GOT_TRACING;
}

static int still_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    patched *p = arg;
    (void)size;
    return info->dlpi_addr == p->object;
}

bool fs_got_detach(void)
{
    if (!atomic_exchange(&attached, false)) return false;
    if (watching) pthread_join(watcher, NULL);
    watching = false;
    pthread_mutex_lock(&patch_lock);
    for (size_t i = nslots; i-- > 0;)
        if (dl_iterate_phdr(still_loaded, &slots[i]))
            fs_slot_write(slots[i].slot, slots[i].old, slots[i].relro);
    nslots = 0;
    pthread_mutex_unlock(&patch_lock);
    fs_hooks_set_tracing(false);
    fs_passive_stop();
    return true;
}
