/* real_loader.c - the C library's dlsym and dlvsym, and a loaded object's
 * own functions read from its dynamic symbol table (real.h): the loader's
 * part of the one resolver.
 *
 * The real dlsym and dlvsym cannot be looked up with dlsym or dlvsym: the
 * shim's own references to either bind to its own definitions
 * (driver/dlsym.c), which carry no version and so also satisfy
 * dlsym@GLIBC_2.34 (as the runtime's names satisfy cudaMalloc@libcudart.so.13);
 * dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34") would come back to the shim. They
 * are read from the dynamic symbol table of the first object after the shim
 * that defines them (libc.so.6 from glibc 2.34, libdl.so.2 before it),
 * found by walking the loader's list of objects (_r_debug): no lock, no
 * call, no version name to guess (glibc >= 2.34 exports neither _dl_sym nor
 * __libc_dlsym). Sanitizer runtimes resolve their interceptors through the
 * shim's dlsym while they initialise, and libraries probe symbols from
 * constructors before the shim's own have run: everything here is
 * FS_LOOKUP_PATH (not instrumented, no lock, no allocation; TSan intercepts
 * dl_iterate_phdr, which is why _r_debug is walked). */
#include "hooks.h"
#include "lifetime.h"
#include "real.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>

/* The native ELF class's types (link.h's ElfW, which clang-format misreads). */
typedef ElfW(Sym) elf_sym;
typedef ElfW(Half) elf_half;
typedef ElfW(Dyn) elf_dyn;
typedef ElfW(Addr) elf_addr;

/* The real functions, once found, are kept in the hook table (hooks.h). */
#define REAL_DLSYM  (&fs_hooks[FS_HOOK_DLSYM].real)
#define REAL_DLVSYM (&fs_hooks[FS_HOOK_DLVSYM].real)

FS_LOOKUP_PATH static bool same_string(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* The hash functions of DT_GNU_HASH and DT_HASH (the System V ABI's). */
FS_LOOKUP_PATH static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;

    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

FS_LOOKUP_PATH static uint32_t sysv_hash(const char *s)
{
    uint32_t h = 0, g;

    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        g = h & 0xf0000000u;
        h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

/* One loaded object's dynamic symbol table. */
struct symbols {
    uintptr_t base;
    const elf_sym *symtab;
    const char *strtab;
    const elf_half *versym;   /* NULL when the object has no versions */
    const uint32_t *gnu_hash; /* at least one of the two hash tables */
    const uint32_t *sysv_hash;
};

/* An address in the dynamic section: glibc relocates them in place, except
 * where the section is read-only (the vDSO's; on some targets every one). */
FS_LOOKUP_PATH static const void *dynamic_address(uintptr_t base, elf_addr ptr)
{
    return (const void *)(ptr < base ? ptr + base : ptr);
}

FS_LOOKUP_PATH static bool read_symbols(const struct link_map *m, struct symbols *t)
{
    *t = (struct symbols){.base = m->l_addr};
    if (!m->l_ld) return false;
    for (const elf_dyn *d = m->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            t->symtab = dynamic_address(t->base, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            t->strtab = dynamic_address(t->base, d->d_un.d_ptr);
            break;
        case DT_VERSYM:
            t->versym = dynamic_address(t->base, d->d_un.d_ptr);
            break;
        case DT_GNU_HASH:
            t->gnu_hash = dynamic_address(t->base, d->d_un.d_ptr);
            break;
        case DT_HASH:
            t->sysv_hash = dynamic_address(t->base, d->d_un.d_ptr);
            break;
        }
    }
    return t->symtab && t->strtab && (t->gnu_hash || t->sysv_hash);
}

/* Symbol i if it is the definition of function `name` in its default
 * version (the one dlsym answers with), else NULL. */
FS_LOOKUP_PATH static void *definition(const struct symbols *t, uint32_t i, const char *name)
{
    const elf_sym *sym = &t->symtab[i];

    /* the type is st_info's low nibble in both ELF classes */
    if (sym->st_shndx == SHN_UNDEF || (sym->st_info & 0xf) != STT_FUNC) return NULL;
    if (t->versym && (t->versym[i] & 0x8000)) return NULL; /* a hidden, older version */
    if (!same_string(t->strtab + sym->st_name, name)) return NULL;
    return (void *)(t->base + sym->st_value);
}

FS_LOOKUP_PATH static void *find_gnu(const struct symbols *t, const char *name)
{
    const uint32_t nbuckets = t->gnu_hash[0], symoffset = t->gnu_hash[1];
    const elf_addr *bloom = (const elf_addr *)&t->gnu_hash[4];
    const uint32_t *buckets = (const uint32_t *)&bloom[t->gnu_hash[2]];
    const uint32_t *chain = &buckets[nbuckets];
    const uint32_t h = gnu_hash(name);
    uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;
    void *fn;

    if (i < symoffset) return NULL; /* an empty bucket */
    for (;; i++) {
        uint32_t link = chain[i - symoffset];
        if ((link | 1) == (h | 1) && (fn = definition(t, i, name))) return fn;
        if (link & 1) return NULL; /* the bucket's last symbol */
    }
}

FS_LOOKUP_PATH static void *find_sysv(const struct symbols *t, const char *name)
{
    const uint32_t nbuckets = t->sysv_hash[0];
    const uint32_t *buckets = &t->sysv_hash[2], *chain = &buckets[nbuckets];
    void *fn;

    if (!nbuckets) return NULL;
    for (uint32_t i = buckets[sysv_hash(name) % nbuckets]; i != STN_UNDEF; i = chain[i])
        if ((fn = definition(t, i, name))) return fn;
    return NULL;
}

FS_LOOKUP_PATH void *fs_object_function(const struct link_map *object, const char *name)
{
    struct symbols t;

    if (!read_symbols(object, &t)) return NULL;
    return t.gnu_hash ? find_gnu(&t, name) : find_sysv(&t, name);
}

/* The function `name` as dlsym(RTLD_NEXT) called from the shim would find
 * it: defined by the first object after the shim in the loader's order. A
 * shim that was dlopen'ed rather than preloaded comes after the C library:
 * then the first object other than the shim. Only objects loaded at
 * start-up are read before the C library is reached, and those are never
 * unloaded, so the list needs no lock. */
FS_LOOKUP_PATH static void *next_function(const char *name)
{
    const struct link_map *m;
    bool past_shim = false;
    void *fn = NULL;

    for (m = _r_debug.r_map; m && !fn; m = m->l_next) {
        if (m->l_ld == _DYNAMIC)
            past_shim = true;
        else if (past_shim)
            fn = fs_object_function(m, name);
    }
    for (m = _r_debug.r_map; m && !fn; m = m->l_next)
        if (m->l_ld != _DYNAMIC) fn = fs_object_function(m, name);
    return fn;
}

/* Nothing can be looked up without it; it cannot be missing from a
 * process that links the C library. */
__attribute__((noreturn)) static void no_real_function(const char *name)
{
    fs_log(FS_LOG_ERROR,
           "the C library's %s is not among the loaded objects after libfsdpshim.so; "
           "no symbol lookup can be made",
           name);
    abort();
}

/* The real function `name`, kept in *slot once found (threads that race
 * find the same one). */
FS_LOOKUP_PATH static void *real_function(void **slot, const char *name)
{
    void *fn = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

    if (fs_likely(fn != NULL)) return fn;
    fn = next_function(name);
    if (!fn) no_real_function(name);
    __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    return fn;
}

/* While the process has one thread, unless a lookup came first (a
 * sanitizer's, or a constructor's). */
FS_LOOKUP_PATH static void find_real_functions(void)
{
    real_function(REAL_DLSYM, "dlsym");
    real_function(REAL_DLVSYM, "dlvsym");
}

FS_LIFETIME(lookup) = {.order = FS_ORDER_LOOKUP, .init = find_real_functions};

FS_LOOKUP_PATH void *fs_real_dlsym(void *handle, const char *name)
{
    fs_dlsym_fn real = (fs_dlsym_fn)real_function(REAL_DLSYM, "dlsym");

    return real(handle, name);
}

FS_LOOKUP_PATH void *fs_real_dlvsym(void *handle, const char *name, const char *version)
{
    fs_dlvsym_fn real = (fs_dlvsym_fn)real_function(REAL_DLVSYM, "dlvsym");

    return real(handle, name, version);
}

FS_LOOKUP_PATH fs_dlsym_fn fs_real_dlsym_fn(void)
{
    return (fs_dlsym_fn)real_function(REAL_DLSYM, "dlsym");
}

FS_LOOKUP_PATH fs_dlvsym_fn fs_real_dlvsym_fn(void)
{
    return (fs_dlvsym_fn)real_function(REAL_DLVSYM, "dlvsym");
}
