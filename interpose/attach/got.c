/* got.c - `fsdpshim attach` without CUPTI: the hooked entry points of every
 * loaded object redirected, through its GOT/PLT slots, to trace-only
 * functions (docs/attach.md).
 *
 * Each object's dynamic section gives its symbol and string tables and its
 * relocations; every R_*_JUMP_SLOT and R_*_GLOB_DAT slot that names an
 * entry point of the hook table (hooks.h) with a traced function is written
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

#include "../hooks.h"
#include "../shim.h"
#include "passive.h"

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
        if (!h->traced || strcmp(name, h->name)) continue;
        if (kind == OBJECT_LOOKUPS && !(h->flags & FS_HOOK_LOOKUP)) return NULL;
        return fs_hook_real((enum fs_hook_id)i) ? h->traced : NULL;
    }
    return NULL;
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
                              uintptr_t relro_hi, enum object_kind kind)
{
    for (size_t i = 0; i < n; i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != SLOT_JUMP && type != SLOT_GLOB) continue;
        const char *name = strtab + symtab[ELF64_R_SYM(rel[i].r_info)].st_name;
        void *traced = traced_for(name, kind);
        if (!traced) continue;
        void **slot = (void **)(base + rel[i].r_offset);
        void *old = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        bool relro = (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi;
        if (old == traced) continue; /* patched already */
        if (remember((patched){slot, old, base, relro})) write_slot(slot, traced, relro);
    }
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t base = info->dlpi_addr, relro_lo = 0, relro_hi = 0;
    enum object_kind kind;
    (void)size;
    (void)arg;
    if (!info->dlpi_name || (kind = object_kind(info->dlpi_name)) == OBJECT_NONE) return 0;
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
                          relro_hi, kind);
    if (rela)
        patch_relocations(base, rela, rela_size / sizeof *rela, symtab, strtab, relro_lo, relro_hi,
                          kind);
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
            write_slot(slots[i].slot, slots[i].old, slots[i].relro);
    nslots = 0;
    pthread_mutex_unlock(&patch_lock);
    fs_hooks_set_tracing(false);
    fs_passive_stop();
    return true;
}
