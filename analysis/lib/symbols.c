/* symbols.c - offline symbolisation with libdw (symbols.h).
 *
 * A trace records a frame as an offset from its module's lowest mapped
 * address (trace/modules.c: load bias + the first PT_LOAD's p_vaddr). The
 * module is reported to libdwfl at bias 0, so its addresses are the ELF's
 * own virtual addresses: the frame is at that first PT_LOAD's p_vaddr plus
 * the offset. Separate debug files are found the standard way
 * (/usr/lib/debug/.build-id, .gnu_debuglink). Inlined frames come from the
 * DWARF scopes at the address: each DW_TAG_inlined_subroutine is a frame,
 * placed at the line the line table gives (innermost) or at the call site
 * the next inner one records (DW_AT_call_file, DW_AT_call_line). */
#include "symbols.h"

#include "u64map.h"

#include <dwarf.h>
#include <errno.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* libstdc++'s demangler (the Itanium C++ ABI's), the one every C++ tool uses */
extern char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

#define MAX_INLINE 32

typedef struct module {
    char *path;
    uint8_t build_id[64];
    size_t build_id_len;
    Dwfl *dwfl;
    Dwfl_Module *mod; /* NULL: not usable, frames stay module+offset */
    uint64_t lo;      /* lowest PT_LOAD p_vaddr */
    fs_u64map cache;  /* offset -> its frames (resolved), each resolved once */
} module;

typedef struct resolved {
    fs_symbol_frame *frames;
    size_t n;
} resolved;

struct fs_symbols {
    void (*warn)(void *ctx, const char *line);
    void *ctx;
    module *modules;
    size_t nmodules;
    /* the ranks of a job are read side by side (parallel.h) and share the
     * modules and the cache: each lookup holds it. It is taken once per
     * unique frame of each file, never per event (sites.c renders each
     * stack id once), and libdw is not thread-safe. */
    pthread_mutex_t lock;
};

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

fs_symbols *fs_symbols_create(void (*warn)(void *ctx, const char *line), void *ctx)
{
    fs_symbols *s = calloc(1, sizeof *s);
    if (s) {
        s->warn = warn;
        s->ctx = ctx;
        pthread_mutex_init(&s->lock, NULL);
    }
    return s;
}

void fs_symbols_destroy(fs_symbols *s)
{
    if (!s) return;
    for (size_t i = 0; i < s->nmodules; i++) {
        void *v;
        for (size_t pos = 0; fs_u64map_next(&s->modules[i].cache, &pos, NULL, &v);) {
            resolved *r = v;
            for (size_t j = 0; j < r->n; j++) {
                free((char *)r->frames[j].function);
                free((char *)r->frames[j].file);
            }
            free(r->frames);
        }
        fs_u64map_free(&s->modules[i].cache);
        free(s->modules[i].path);
        if (s->modules[i].dwfl) dwfl_end(s->modules[i].dwfl);
    }
    free(s->modules);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static void warn(fs_symbols *s, const char *path, const char *why)
{
    char line[4400];
    if (!s->warn) return;
    snprintf(line, sizeof line, "%s: %s: its frames are shown as module+offset", path, why);
    s->warn(s->ctx, line);
}

static uint64_t lowest_load(Dwfl_Module *mod)
{
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(mod, &bias);
    size_t n = 0;
    uint64_t lo = UINT64_MAX;

    if (!elf || elf_getphdrnum(elf, &n) != 0) return 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_vaddr < lo)
            lo = ph.p_vaddr;
    }
    return lo == UINT64_MAX ? 0 : lo;
}

/* Opens a module once: its index + 1, or 0 when out of memory. */
static uint32_t module_of(fs_symbols *s, const char *path, const uint8_t *bid, size_t bid_len)
{
    for (size_t i = 0; i < s->nmodules; i++) {
        const module *m = &s->modules[i];
        if (m->build_id_len == bid_len && !memcmp(m->build_id, bid, bid_len) &&
            !strcmp(m->path, path))
            return (uint32_t)i + 1;
    }
    module *more = realloc(s->modules, (s->nmodules + 1) * sizeof *more);
    if (!more) return 0;
    s->modules = more;
    module *m = &s->modules[s->nmodules];
    *m = (module){.path = strdup(path)};
    fs_u64map_init(&m->cache, sizeof(resolved));
    if (!m->path) return 0;
    if (bid_len > sizeof m->build_id) bid_len = sizeof m->build_id;
    memcpy(m->build_id, bid, bid_len);
    m->build_id_len = bid_len;
    s->nmodules++;

    /* only a regular file is opened: a trace can name any path, and
     * opening a FIFO or a device could block, or read without end */
    struct stat st;
    const char *why = stat(path, &st) != 0   ? strerror(errno)
                      : !S_ISREG(st.st_mode) ? "not a regular file"
                                             : NULL;
    if (why) {
        warn(s, path, why);
        return (uint32_t)s->nmodules;
    }
    m->dwfl = dwfl_begin(&callbacks);
    Dwfl_Module *mod = m->dwfl ? dwfl_report_elf(m->dwfl, path, path, -1, 0, false) : NULL;
    if (m->dwfl) dwfl_report_end(m->dwfl, NULL, NULL);
    if (!mod) {
        warn(s, path, m->dwfl ? dwfl_errmsg(-1) : "libdw cannot start");
        return (uint32_t)s->nmodules;
    }
    const unsigned char *bits;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (bid_len && (len != (int)bid_len || memcmp(bits, bid, bid_len) != 0)) {
        warn(s, path, "not the file the trace was made with (its build id differs)");
        return (uint32_t)s->nmodules;
    }
    m->mod = mod;
    m->lo = lowest_load(mod);
    return (uint32_t)s->nmodules;
}

static char *demangled(const char *name)
{
    if (!name) return NULL;
    if (name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        char *d = __cxa_demangle(name, NULL, NULL, &status);
        if (d && status == 0) return d;
        free(d);
    }
    return strdup(name);
}

/* A function DIE's name: its linkage name demangled (namespaces and
 * classes included), else its plain name, through abstract origins and
 * specifications. */
static char *die_name(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!n) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (!n) n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
    return demangled(n);
}

/* Where an inlined subroutine was called from, in its CU's file table. */
static void call_site(Dwarf_Die *cu, Dwarf_Die *inl, const char **file, unsigned *line)
{
    Dwarf_Attribute a;
    Dwarf_Word idx = 0, ln = 0;
    Dwarf_Files *files;
    size_t nfiles;

    *file = NULL;
    *line = 0;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &a), &ln) == 0) *line = (unsigned)ln;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &a), &idx) == 0 &&
        dwarf_getsrcfiles(cu, &files, &nfiles) == 0 && idx < nfiles)
        *file = dwarf_filesrc(files, idx, NULL, NULL);
}

static bool is_function(Dwarf_Die *die)
{
    int tag = dwarf_tag(die);
    return tag == DW_TAG_inlined_subroutine || tag == DW_TAG_subprogram ||
           tag == DW_TAG_entry_point;
}

/* The innermost function-like scope at pc and every scope that contains
 * it, physically (dwarf_getscopes_die from a concrete DIE: dwarf_getscopes
 * alone continues an inlined instance into its abstract definition). */
static int function_scopes(Dwfl_Module *mod, Dwarf_Die *cu, Dwarf_Addr cupc, Dwarf_Die **out)
{
    Dwarf_Die *scopes = NULL, inner;
    int n = dwarf_getscopes(cu, cupc, &scopes), i = 0;
    Dwarf_Addr bias;

    while (i < n && !is_function(&scopes[i]))
        i++;
    Dwarf *dw = dwfl_module_getdwarf(mod, &bias);
    bool found = i < n && dw && dwarf_offdie(dw, dwarf_dieoffset(&scopes[i]), &inner);
    free(scopes);
    if (!found) return 0;
    return dwarf_getscopes_die(&inner, out);
}

static size_t resolve_uncached(const module *m, uint64_t offset, fs_symbol_frame *out)
{
    Dwarf_Addr pc = m->lo + offset - (offset ? 1 : 0), bias = 0;
    const char *file = NULL;
    unsigned line = 0;
    size_t n = 0;

    Dwarf_Die *cu = dwfl_module_addrdie(m->mod, pc, &bias);
    if (cu) { /* a line outside every CU is another CU's nearest, not this code's */
        Dwfl_Line *l = dwfl_module_getsrc(m->mod, pc);
        int lineno = 0;
        if (l) file = dwfl_lineinfo(l, NULL, &lineno, NULL, NULL, NULL);
        line = lineno > 0 ? (unsigned)lineno : 0;
    }
    Dwarf_Die *scopes = NULL;
    int nscopes = cu ? function_scopes(m->mod, cu, pc - bias, &scopes) : 0;
    for (int i = 0; i < nscopes && n < MAX_INLINE; i++) {
        if (!is_function(&scopes[i])) continue;
        bool inlined = dwarf_tag(&scopes[i]) == DW_TAG_inlined_subroutine;
        out[n++] = (fs_symbol_frame){.function = die_name(&scopes[i]),
                                     .file = file ? strdup(file) : NULL,
                                     .line = line,
                                     .inlined = inlined};
        if (!inlined) break;
        call_site(cu, &scopes[i], &file, &line);
    }
    free(scopes);
    if (!n) {
        /* no function in the DWARF here (a CU lookup may still name the
         * nearest CU, whose lines are not this code's): the symbol table's
         * name alone */
        const char *sym = dwfl_module_addrname(m->mod, pc);
        if (!sym) return 0;
        out[n++] = (fs_symbol_frame){.function = demangled(sym)};
    }
    return n;
}

/* fs_symbols_resolve, under s->lock */
static size_t resolve(fs_symbols *s, const char *path, const uint8_t *build_id, size_t build_id_len,
                      uint64_t offset, const fs_symbol_frame **frames)
{
    uint32_t mi = module_of(s, path, build_id, build_id_len);
    if (!mi || !s->modules[mi - 1].mod) return 0;
    module *m = &s->modules[mi - 1];
    const resolved *known = fs_u64map_get(&m->cache, offset);
    if (known) {
        *frames = known->frames;
        return known->n;
    }
    fs_symbol_frame tmp[MAX_INLINE];
    size_t n = resolve_uncached(m, offset, tmp);
    fs_symbol_frame *kept = n ? malloc(n * sizeof *kept) : NULL;
    if (n && !kept) return 0;
    if (n) memcpy(kept, tmp, n * sizeof *kept);
    resolved *r = fs_u64map_put(&m->cache, offset, NULL);
    if (!r) {
        free(kept);
        return 0;
    }
    *r = (resolved){kept, n};
    *frames = kept;
    return n;
}

size_t fs_symbols_resolve(fs_symbols *s, const char *path, const uint8_t *build_id,
                          size_t build_id_len, uint64_t offset, const fs_symbol_frame **frames)
{
    pthread_mutex_lock(&s->lock);
    size_t n = resolve(s, path, build_id, build_id_len, offset, frames);
    pthread_mutex_unlock(&s->lock);
    return n;
}
