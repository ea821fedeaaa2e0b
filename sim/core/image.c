/* image.c - reading device code images: what an image declares becomes a
 * module (modules.c), for the runtime's libraries
 * (sim/cudart/library_management.c) and for the fat binaries nvcc's
 * generated code registers.
 *
 * The sim cannot run device code, but it can read what an image declares:
 * from a cubin (an ELF file), the kernels (function symbols marked as entry
 * points, STO_CUDA_ENTRY) and the variables (object symbols, with their
 * sizes); from PTX text, the `.entry` kernels and the module-scope `.global`
 * and `.const` variables; from a fat binary, its first uncompressed cubin,
 * else its first uncompressed PTX. A module's variables get device memory
 * on first use, starting from a cubin's initialised data (PTX initialisers
 * are not parsed: zeros). The same reader finds the initial values of
 * variables that nvcc's generated code registers (sim_image_var_init). What
 * the sim cannot read, a fat binary whose entries are all compressed (the
 * toolkit's default for large ones), is cudaErrorNotSupported; anything
 * else unrecognised is cudaErrorInvalidKernelImage. */
#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fatbinary_section.h>

#include "sim.h"

#define FATBINC_WRAPPER_MAGIC ((uint32_t)FATBINC_MAGIC) /* __fatBinC_Wrapper_t */
#define FATBIN_MAGIC          0xBA55ED50u
#define FATBIN_KIND_PTX       1
#define FATBIN_KIND_ELF       2
/* Entry flags of compressed payloads: LZ4 (older toolkits), zstd (13.x). */
#define FATBIN_COMPRESSED (0x2000u | 0x8000u)
#define STO_CUDA_ENTRY    0x10

/* ---- reading images ---- */

/* One symbol of a cubin that the sim cares about. */
struct cubin_symbol {
    const char *name;
    int kernel;       /* an entry point; else a variable */
    size_t size;      /* a variable's */
    int managed;      /* a variable in .nv.managed */
    const void *init; /* a variable's initial bytes (.nv.global.init, constant banks), or NULL */
};

/* Calls fn for each kernel and variable of an ELF cubin of `size` bytes
 * (or unknown: SIZE_MAX, trusted as the runtime trusts it) until it
 * returns nonzero, which is then returned; cudaErrorInvalidKernelImage when
 * the file is not one the sim can read. */
static int each_symbol(const unsigned char *img, size_t size,
                       int (*fn)(const struct cubin_symbol *s, void *arg), void *arg)
{
    const Elf64_Ehdr *eh = (const void *)img;
    if (size < sizeof *eh || eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shstrndx >= eh->e_shnum ||
        eh->e_shentsize != sizeof(Elf64_Shdr) || eh->e_shoff > size ||
        eh->e_shnum > (size - eh->e_shoff) / sizeof(Elf64_Shdr))
        return cudaErrorInvalidKernelImage;
    const Elf64_Shdr *sh = (const void *)(img + eh->e_shoff);
    const Elf64_Shdr *shstr = &sh[eh->e_shstrndx];
    int shstr_ok = shstr->sh_offset < size && shstr->sh_size <= size - shstr->sh_offset;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_SYMTAB) continue;
        if (sh[i].sh_link >= eh->e_shnum || sh[i].sh_offset > size ||
            sh[i].sh_size > size - sh[i].sh_offset)
            return cudaErrorInvalidKernelImage;
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        if (str->sh_offset > size || str->sh_size > size - str->sh_offset || !str->sh_size)
            return cudaErrorInvalidKernelImage;
        const char *names = (const char *)img + str->sh_offset;
        const Elf64_Sym *sym = (const void *)(img + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof *sym;
        for (size_t j = 0; j < n; j++) {
            if (sym[j].st_name >= str->sh_size || sym[j].st_shndx == SHN_UNDEF ||
                sym[j].st_shndx >= eh->e_shnum)
                continue;
            struct cubin_symbol s = {names + sym[j].st_name, 0, sym[j].st_size, 0, NULL};
            if (!memchr(s.name, 0, str->sh_size - sym[j].st_name)) continue;
            const Elf64_Shdr *in = &sh[sym[j].st_shndx];
            int type = ELF64_ST_TYPE(sym[j].st_info);
            if (type == STT_FUNC && (sym[j].st_other & STO_CUDA_ENTRY)) {
                s.kernel = 1;
            } else if (type == STT_OBJECT && s.size) {
                /* Managed variables live in the .nv.managed section. */
                s.managed = shstr_ok && in->sh_name < shstr->sh_size &&
                            shstr->sh_size - in->sh_name >= 12 &&
                            memcmp(img + shstr->sh_offset + in->sh_name, ".nv.managed", 11) == 0;
                /* Initialised variables have their bytes in the file. */
                if (in->sh_type == SHT_PROGBITS && in->sh_offset <= size &&
                    in->sh_size <= size - in->sh_offset && sym[j].st_value <= in->sh_size &&
                    s.size <= in->sh_size - sym[j].st_value)
                    s.init = img + in->sh_offset + sym[j].st_value;
            } else {
                continue;
            }
            int r = fn(&s, arg);
            if (r) return r;
        }
        return cudaSuccess;
    }
    return cudaErrorInvalidKernelImage;
}

static int add_symbol(const struct cubin_symbol *s, void *m)
{
    if (s->kernel) return sim_module_add_kernel(m, NULL, s->name) ? 0 : cudaErrorMemoryAllocation;
    return sim_module_add_var(m, NULL, s->name, s->size, s->managed, s->init)
               ? cudaErrorMemoryAllocation
               : 0;
}

static cudaError_t read_elf(struct sim_module *m, const unsigned char *img, size_t size)
{
    return (cudaError_t)each_symbol(img, size, add_symbol, m);
}

/* Bytes of one PTX scalar type token (".b8", ".u32", ".f64", ...), 0 if none. */
static size_t ptx_type_size(const char *tok, size_t len)
{
    if (len < 3 || tok[0] != '.' || !strchr("bsuf", tok[1])) return 0;
    int bits = atoi(tok + 2);
    return bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (size_t)bits / 8 : 0;
}

/* One module-scope `.global`/`.const` declaration starting at p, e.g.
 * ".global .align 4 .b8 gvar[16] = {...};". */
static int ptx_var(struct sim_module *m, const char *p)
{
    size_t elem = 0;
    int managed = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        size_t len = strcspn(p, " \t\n;[=");
        if (!len) return 0;
        if (*p != '.') { /* the name */
            char name[256];
            if (!elem || len >= sizeof name) return 0;
            memcpy(name, p, len);
            name[len] = 0;
            size_t count = p[len] == '[' ? strtoul(p + len + 1, NULL, 10) : 1;
            return count ? sim_module_add_var(m, NULL, name, elem * count, managed, NULL) : 0;
        }
        if (ptx_type_size(p, len)) elem = ptx_type_size(p, len);
        if (strncmp(p, ".attribute(.managed)", 20) == 0) managed = 1;
        if (strncmp(p, ".align", len) == 0 && len == 6) p += strspn(p + len, " \t0123456789");
        p += len;
    }
}

static cudaError_t read_ptx(struct sim_module *m, const char *text, size_t size)
{
    int depth = 0, seen = 0;
    for (size_t i = 0; i < size && text[i]; i++) {
        const char *p = text + i;
        if (*p == '{') depth++;
        if (*p == '}') depth--;
        if (*p == '/' && p[1] == '/') {
            i += strcspn(p, "\n");
            continue;
        }
        if (depth || *p != '.' || (i && !strchr(" \t\n", p[-1]))) continue;
        if (strncmp(p, ".version", 8) == 0) seen = 1;
        if (strncmp(p, ".entry", 6) == 0 && (p[6] == ' ' || p[6] == '\t')) {
            const char *name = p + 6 + strspn(p + 6, " \t");
            size_t len = strcspn(name, " \t\n(");
            char *copy = strndup(name, len);
            int bad = !copy || !sim_module_add_kernel(m, NULL, copy);
            free(copy);
            if (bad) return cudaErrorMemoryAllocation;
        } else if ((strncmp(p, ".global ", 8) == 0 || strncmp(p, ".const ", 7) == 0) &&
                   ptx_var(m, p + 6 + (p[1] == 'g'))) {
            return cudaErrorMemoryAllocation;
        }
    }
    return seen ? cudaSuccess : cudaErrorInvalidKernelImage;
}

/* What a fat binary container holds that the sim can read: its first
 * uncompressed cubin and PTX (NULL when none), and whether any entry was
 * compressed. -1 for a malformed container. */
struct fatbin_parts {
    const unsigned char *cubin, *ptx;
    uint64_t cubin_size, ptx_size;
    int compressed;
};

static int fatbin_parts(const unsigned char *img, struct fatbin_parts *p)
{
    uint32_t header_size;
    uint64_t fat_size;
    memcpy(&header_size, img + 4, 4);
    header_size >>= 16; /* u16 version, u16 header size */
    memcpy(&fat_size, img + 8, 8);
    *p = (struct fatbin_parts){NULL, NULL, 0, 0, 0};
    for (uint64_t off = header_size; off + 0x40 <= header_size + fat_size;) {
        const unsigned char *e = img + off;
        uint16_t kind;
        uint32_t entry_header;
        uint64_t payload, flags;
        memcpy(&kind, e, 2);
        memcpy(&entry_header, e + 4, 4);
        memcpy(&payload, e + 8, 8);
        memcpy(&flags, e + 0x28, 8);
        if (entry_header < 0x40 || payload > fat_size) return -1;
        if ((kind == FATBIN_KIND_PTX || kind == FATBIN_KIND_ELF) && (flags & FATBIN_COMPRESSED)) {
            p->compressed = 1;
        } else if (kind == FATBIN_KIND_ELF && !p->cubin) {
            p->cubin = e + entry_header;
            p->cubin_size = payload;
        } else if (kind == FATBIN_KIND_PTX && !p->ptx) {
            p->ptx = e + entry_header;
            p->ptx_size = payload;
        }
        off += entry_header + payload;
    }
    return 0;
}

/* A fat binary container: its first uncompressed cubin, else PTX. */
static cudaError_t read_fatbin(struct sim_module *m, const unsigned char *img)
{
    struct fatbin_parts p;
    if (fatbin_parts(img, &p)) return cudaErrorInvalidKernelImage;
    if (p.cubin) return read_elf(m, p.cubin, p.cubin_size);
    if (p.ptx) return read_ptx(m, (const char *)p.ptx, p.ptx_size);
    return p.compressed ? cudaErrorNotSupported : cudaErrorInvalidKernelImage;
}

/* For sim_image_var_init: the variable looked for, and what was found. */
struct var_lookup {
    const char *name;
    const void *init;
    size_t size;
};

static int match_var(const struct cubin_symbol *s, void *arg)
{
    struct var_lookup *l = arg;
    if (s->kernel || strcmp(s->name, l->name) != 0) return 0;
    l->init = s->init;
    l->size = s->size;
    return 1;
}

const void *sim_image_var_init(const void *fat_cubin, const char *name, size_t *size)
{
    const __fatBinC_Wrapper_t *w = fat_cubin;
    struct fatbin_parts p;
    uint32_t magic;
    if (!w || !name || (uint32_t)w->magic != FATBINC_WRAPPER_MAGIC || !w->data) return NULL;
    memcpy(&magic, w->data, 4);
    if (magic != FATBIN_MAGIC || fatbin_parts((const unsigned char *)w->data, &p) || !p.cubin)
        return NULL;
    struct var_lookup l = {name, NULL, 0};
    if (each_symbol(p.cubin, p.cubin_size, match_var, &l) != 1) return NULL;
    *size = l.size;
    return l.init;
}

cudaError_t sim_image_read(struct sim_module *m, const void *code, size_t size)
{
    const unsigned char *img = code;
    uint32_t magic;
    memcpy(&magic, img, 4);
    if (magic == FATBINC_WRAPPER_MAGIC) {
        const unsigned char *data;
        memcpy(&data, img + 8, sizeof data); /* __fatBinC_Wrapper_t.data */
        if (!data) return cudaErrorInvalidKernelImage;
        img = data;
        size = SIZE_MAX;
        memcpy(&magic, img, 4);
    }
    if (magic == FATBIN_MAGIC) return read_fatbin(m, img);
    if (memcmp(img, ELFMAG, SELFMAG) == 0) return read_elf(m, img, size);
    return read_ptx(m, code, size);
}
