/* got.c - `fsdpshim attach` without CUPTI: the CUDA runtime entry points of
 * every loaded object redirected, through its GOT/PLT slots, to trace-only
 * wrappers (docs/cli.md, "attach").
 *
 * Each object's dynamic section gives its symbol and string tables and its
 * relocations; every R_*_JUMP_SLOT and R_*_GLOB_DAT slot that names an
 * entry point of the table below is written with the wrapper's address, and
 * its old value kept so that detach writes it back. A wrapper calls the
 * runtime's own function (found by real.c, never the slot's old value, which
 * under lazy binding is a PLT stub that would rebind the slot) and writes the
 * event through passive.c. The CUDA libraries themselves (the runtime calling
 * itself, the driver, CUPTI, NCCL) and the shim are left alone. Slots in a
 * RELRO segment are made writable for the write and read-only again.
 *
 * Objects loaded after the attach: a thread of the shim's own watches the
 * loader's count of loaded objects (dl_iterate_phdr's dlpi_adds) every 50 ms
 * and patches what is new. Wrapping dlopen instead would change its answers:
 * glibc reads dlopen's caller (its return address) for the caller's RUNPATH,
 * $ORIGIN and namespace, which a wrapper would make the shim's. */
#include "got.h"

#include "passive.h"
#include "../real.h"
#include "../shim.h"
#include "../trace_glue.h"

#include <cuda_runtime_api.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SLOT_JUMP R_X86_64_JUMP_SLOT
#define SLOT_GLOB R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define SLOT_JUMP R_AARCH64_JUMP_SLOT
#define SLOT_GLOB R_AARCH64_GLOB_DAT
#else
#error "got.c: the slot relocation types of this architecture"
#endif

/* ---- the trace-only wrappers ------------------------------------------------ */

enum hook_id {
    H_MALLOC,
    H_FREE,
    H_MALLOC_ASYNC,
    H_MALLOC_ASYNC_PTSZ,
    H_FREE_ASYNC,
    H_FREE_ASYNC_PTSZ,
    H_MALLOC_FROM_POOL,
    H_STREAM_CREATE,
    H_STREAM_CREATE_FLAGS,
    H_STREAM_CREATE_PRIORITY,
    H_STREAM_DESTROY,
    H_COUNT,
};

static void *real[H_COUNT];

/* The legacy stream is 0 in traces, as in the CUDA API. */
static uint64_t stream_value(cudaStream_t s)
{
    return s == cudaStreamLegacy ? 0 : (uint64_t)(uintptr_t)s;
}

/* The runtime's current device: the shim's own per-thread cache is kept
 * by entry points that are not in effect here. */
static int current_device(void)
{
    static void *get_device;
    int d = -1;
    void *fn = fs_real_cached(&get_device, FS_LIB_CUDART, "cudaGetDevice");
    if (!fn || ((__typeof__(&cudaGetDevice))fn)(&d) != cudaSuccess) return -1;
    return d;
}

static cudaError_t got_malloc(void **p, size_t size)
{
    fs_passive_enter();
    cudaError_t e = ((__typeof__(&cudaMalloc))real[H_MALLOC])(p, size);
    if (e == cudaSuccess && p) fs_passive_alloc(current_device(), 0, (uintptr_t)*p, size, false);
    return e;
}

/* A free's block leaves the live blocks before the runtime has the address
 * back (passive.h). */
static cudaError_t got_free(void *p)
{
    fs_passive_free_enter((uintptr_t)p);
    cudaError_t e = ((__typeof__(&cudaFree))real[H_FREE])(p);
    if (e == cudaSuccess && p)
        fs_passive_free(current_device(), 0, (uintptr_t)p, false);
    else
        fs_passive_free_failed();
    return e;
}

static cudaError_t malloc_async(enum hook_id h, void **p, size_t size, cudaStream_t s)
{
    fs_passive_enter();
    cudaError_t e = ((__typeof__(&cudaMallocAsync))real[h])(p, size, s);
    if (e == cudaSuccess && p)
        fs_passive_alloc(current_device(), stream_value(s), (uintptr_t)*p, size, true);
    return e;
}

static cudaError_t got_malloc_async(void **p, size_t size, cudaStream_t s)
{
    return malloc_async(H_MALLOC_ASYNC, p, size, s);
}

static cudaError_t got_malloc_async_ptsz(void **p, size_t size, cudaStream_t s)
{
    return malloc_async(H_MALLOC_ASYNC_PTSZ, p, size, s);
}

static cudaError_t got_malloc_from_pool(void **p, size_t size, cudaMemPool_t pool, cudaStream_t s)
{
    fs_passive_enter();
    cudaError_t e =
        ((__typeof__(&cudaMallocFromPoolAsync))real[H_MALLOC_FROM_POOL])(p, size, pool, s);
    if (e == cudaSuccess && p)
        fs_passive_alloc(current_device(), stream_value(s), (uintptr_t)*p, size, true);
    return e;
}

static cudaError_t free_async(enum hook_id h, void *p, cudaStream_t s)
{
    fs_passive_free_enter((uintptr_t)p);
    cudaError_t e = ((__typeof__(&cudaFreeAsync))real[h])(p, s);
    if (e == cudaSuccess && p)
        fs_passive_free(current_device(), stream_value(s), (uintptr_t)p, true);
    else
        fs_passive_free_failed();
    return e;
}

static cudaError_t got_free_async(void *p, cudaStream_t s)
{
    return free_async(H_FREE_ASYNC, p, s);
}

static cudaError_t got_free_async_ptsz(void *p, cudaStream_t s)
{
    return free_async(H_FREE_ASYNC_PTSZ, p, s);
}

static cudaError_t stream_created(cudaError_t e, cudaStream_t *s, unsigned flags, int priority)
{
    if (e == cudaSuccess && s) fs_trace_stream(true, current_device(), *s, flags, priority, false);
    return e;
}

static cudaError_t got_stream_create(cudaStream_t *s)
{
    return stream_created(((__typeof__(&cudaStreamCreate))real[H_STREAM_CREATE])(s), s, 0, 0);
}

static cudaError_t got_stream_create_flags(cudaStream_t *s, unsigned flags)
{
    return stream_created(
        ((__typeof__(&cudaStreamCreateWithFlags))real[H_STREAM_CREATE_FLAGS])(s, flags), s, flags,
        0);
}

static cudaError_t got_stream_create_priority(cudaStream_t *s, unsigned flags, int priority)
{
    return stream_created(
        ((__typeof__(&cudaStreamCreateWithPriority))real[H_STREAM_CREATE_PRIORITY])(s, flags,
                                                                                    priority),
        s, flags, priority);
}

static cudaError_t got_stream_destroy(cudaStream_t s)
{
    cudaError_t e = ((__typeof__(&cudaStreamDestroy))real[H_STREAM_DESTROY])(s);
    if (e == cudaSuccess) fs_trace_stream(false, current_device(), s, 0, 0, false);
    return e;
}

static const struct hook {
    const char *name;
    void *wrapper;
} hooks[H_COUNT] = {
    [H_MALLOC] = {"cudaMalloc", (void *)got_malloc},
    [H_FREE] = {"cudaFree", (void *)got_free},
    [H_MALLOC_ASYNC] = {"cudaMallocAsync", (void *)got_malloc_async},
    [H_MALLOC_ASYNC_PTSZ] = {"cudaMallocAsync_ptsz", (void *)got_malloc_async_ptsz},
    [H_FREE_ASYNC] = {"cudaFreeAsync", (void *)got_free_async},
    [H_FREE_ASYNC_PTSZ] = {"cudaFreeAsync_ptsz", (void *)got_free_async_ptsz},
    [H_MALLOC_FROM_POOL] = {"cudaMallocFromPoolAsync", (void *)got_malloc_from_pool},
    [H_STREAM_CREATE] = {"cudaStreamCreate", (void *)got_stream_create},
    [H_STREAM_CREATE_FLAGS] = {"cudaStreamCreateWithFlags", (void *)got_stream_create_flags},
    [H_STREAM_CREATE_PRIORITY] = {"cudaStreamCreateWithPriority",
                                  (void *)got_stream_create_priority},
    [H_STREAM_DESTROY] = {"cudaStreamDestroy", (void *)got_stream_destroy},
};

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

static bool skipped_object(const char *path)
{
    static const char *const names[] = {"libcudart.so", "libcuda.so", "libcupti.so", "libnccl.so",
                                        "libfsdpshim.so"};
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strncmp(base, names[i], strlen(names[i]))) return true;
    return false;
}

/* A dynamic-section address: relocated in place by glibc on most targets,
 * not on some; an address below the load base is still relative. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) p)
{
    return p < base ? base + p : p;
}

static void write_slot(void **slot, void *value, bool relro)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *start = (void *)((uintptr_t)slot & ~(page - 1));
    if (relro && mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (relro) mprotect(start, page, PROT_READ);
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

static void patch_relocations(uintptr_t base, const ElfW(Rela) * rel, size_t n,
                              const ElfW(Sym) * symtab, const char *strtab, uintptr_t relro_lo,
                              uintptr_t relro_hi)
{
    for (size_t i = 0; i < n; i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != SLOT_JUMP && type != SLOT_GLOB) continue;
        const char *name = strtab + symtab[ELF64_R_SYM(rel[i].r_info)].st_name;
        if (name[0] != 'c' || name[1] != 'u') continue;
        for (int h = 0; h < H_COUNT; h++) {
            if (!real[h] || strcmp(name, hooks[h].name)) continue;
            void **slot = (void **)(base + rel[i].r_offset);
            void *old = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            bool relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
            if (old == hooks[h].wrapper) break; /* patched already */
            if (remember((patched){slot, old, base, relro}))
                write_slot(slot, hooks[h].wrapper, relro);
            break;
        }
    }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t base = info->dlpi_addr, relro_lo = 0, relro_hi = 0;
    (void)size;
    (void)arg;
    if (!info->dlpi_name || skipped_object(info->dlpi_name)) return 0;
    if (strstr(info->dlpi_name, "linux-vdso")) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = base + ph->p_vaddr;
            relro_hi = relro_lo + ph->p_memsz;
        }
    }
    if (!dyn) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *jmprel = NULL, *rela = NULL;
    size_t jmprel_size = 0, rela_size = 0;
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            symtab = (const ElfW(Sym) *)dyn_addr(base, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            strtab = (const char *)dyn_addr(base, d->d_un.d_ptr);
            break;
        case DT_JMPREL:
            jmprel = (const ElfW(Rela) *)dyn_addr(base, d->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            jmprel_size = d->d_un.d_val;
            break;
        case DT_RELA:
            rela = (const ElfW(Rela) *)dyn_addr(base, d->d_un.d_ptr);
            break;
        case DT_RELASZ:
            rela_size = d->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if (!symtab || !strtab) return 0;
    if (jmprel)
        patch_relocations(base, jmprel, jmprel_size / sizeof *jmprel, symtab, strtab, relro_lo,
                          relro_hi);
    if (rela)
        patch_relocations(base, rela, rela_size / sizeof *rela, symtab, strtab, relro_lo, relro_hi);
    return 0;
}

static int count_adds(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    *(unsigned long long *)arg = info->dlpi_adds;
    return 1;
}

static void patch_all(void)
{
    pthread_mutex_lock(&patch_lock);
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

bool fs_got_attach(int level, unsigned frames, const char *path)
{
    sigset_t all, old;
    int found = 0;

    if (atomic_load(&attached)) return true;
    for (int h = 0; h < H_COUNT; h++)
        found += (real[h] = fs_real_symbol(FS_LIB_CUDART, hooks[h].name)) != NULL;
    if (!real[H_MALLOC] || !real[H_FREE]) {
        fs_log(FS_LOG_WARN, "fsdpshim attach: no CUDA runtime (libcudart.so) in this process");
        return false;
    }
    if (!fs_passive_start(level, frames, path, "fsdpshim attach, GOT")) return false;
    atomic_store(&attached, true);
    patch_all();
    fs_log(FS_LOG_INFO, "fsdpshim attach: %zu slots of %d runtime entry points redirected", nslots,
           found);
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the thread takes none of the program's signals */
    if (pthread_create(&watcher, NULL, watch_loads, NULL) != 0)
        fs_log(FS_LOG_WARN, "fsdpshim attach: objects loaded from now on are not traced");
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return true;
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
    pthread_join(watcher, NULL);
    pthread_mutex_lock(&patch_lock);
    for (size_t i = nslots; i-- > 0;)
        if (dl_iterate_phdr(still_loaded, &slots[i]))
            write_slot(slots[i].slot, slots[i].old, slots[i].relro);
    nslots = 0;
    pthread_mutex_unlock(&patch_lock);
    fs_passive_stop();
    return true;
}
