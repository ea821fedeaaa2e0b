/* modules.c - the module map: every loaded object (path, GNU build id,
 * mapped range) defined once in the trace, so that the reader resolves a
 * return address to module + offset and symbolises offline.
 *
 * Objects loaded later (Python extension modules, dlopen'ed plugins) are
 * noticed before each stack is captured through the loader's adds/subs
 * counters, which dl_iterate_phdr gives with its first object: one cheap
 * call per capture. An object unloaded and loaded again elsewhere is a new
 * (base, path) pair and gets a new record. */
#include "stack.h"
#include "trace_internal.h"

#include <elf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct known {
    uint64_t base;
    uint32_t path;
} known;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static known *defined;
static size_t ndefined, cap;
static unsigned long long seen_adds = ~0ull, seen_subs = ~0ull;

static bool already_defined(uint64_t base, uint32_t path)
{
    for (size_t i = 0; i < ndefined; i++)
        if (defined[i].base == base && defined[i].path == path) return true;
    return false;
}

static void note_defined(uint64_t base, uint32_t path)
{
    if (ndefined == cap) {
        size_t ncap = cap ? cap * 2 : 256;
        known *n = realloc(defined, ncap * sizeof *n);
        if (!n) return;
        defined = n;
        cap = ncap;
    }
    defined[ndefined++] = (known){base, path};
}

/* The GNU build id from the object's PT_NOTE segments, as mapped. */
static uint32_t build_id(const struct dl_phdr_info *info, const uint8_t **id)
{
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr);
        const uint8_t *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const uint8_t *name = p + sizeof *nh;
            const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (desc + nh->n_descsz > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                *id = desc;
                return nh->n_descsz;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
    return 0;
}

static int define_one(struct dl_phdr_info *info, size_t size, void *arg)
{
    uint8_t rec[FS_FMT_MAX_RECORD];
    uint64_t lo = UINT64_MAX, hi = 0;
    const uint8_t *bid = NULL;
    char exe[4096];
    const char *name = info->dlpi_name;
    (void)size;
    (void)arg;

    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        if (ph->p_vaddr < lo) lo = ph->p_vaddr;
        if (ph->p_vaddr + ph->p_memsz > hi) hi = ph->p_vaddr + ph->p_memsz;
    }
    if (lo >= hi) return 0;
    if (!name || !*name) { /* the main program */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        name = exe;
    }
    uint32_t path = fs_trace_string(name, strlen(name));
    uint64_t base = info->dlpi_addr + lo;
    if (already_defined(base, path)) return 0;
    uint32_t bid_len = build_id(info, &bid);
    fs_trace_define(rec, fs_fmt_put_module(base, hi - lo, path, bid, bid_len, rec));
    note_defined(base, path);
    return 0;
}

void fs_modules_define(void)
{
    if (fs_trace_defs_level() < FS_TRACE_STACKS) return;
    pthread_mutex_lock(&lock);
    dl_iterate_phdr(define_one, NULL);
    pthread_mutex_unlock(&lock);
}

static int counters(struct dl_phdr_info *info, size_t size, void *arg)
{
    unsigned long long *c = arg;
    (void)size;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1; /* the first object carries the counters: stop there */
}

void fs_modules_refresh(void)
{
    unsigned long long c[2];

    dl_iterate_phdr(counters, c);
    if (c[0] == __atomic_load_n(&seen_adds, __ATOMIC_RELAXED) &&
        c[1] == __atomic_load_n(&seen_subs, __ATOMIC_RELAXED))
        return;
    fs_modules_define();
    __atomic_store_n(&seen_adds, c[0], __ATOMIC_RELAXED);
    __atomic_store_n(&seen_subs, c[1], __ATOMIC_RELAXED);
}
