/* slots.c - a loaded object's GOT slots, by the symbol each names
 * (slots.h).
 *
 * The object's dynamic section gives its symbol and string tables and its
 * relocations (DT_JMPREL for the PLT, DT_RELA for the rest); each
 * R_*_JUMP_SLOT and R_*_GLOB_DAT relocation is one slot holding the
 * address of the function it names, which the loader wrote (or, lazily
 * bound, will write on the first call through the PLT stub it holds
 * until then). */
#include "slots.h"

#include <elf.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__)
#define SLOT_JUMP R_X86_64_JUMP_SLOT
#define SLOT_GLOB R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define SLOT_JUMP R_AARCH64_JUMP_SLOT
#define SLOT_GLOB R_AARCH64_GLOB_DAT
#else
#error "slots.c: the slot relocation types of this architecture"
#endif

/* A dynamic-section address: relocated in place by glibc on most targets,
 * not on some; an address below the load base is still relative. */
static uintptr_t dyn_addr(uintptr_t base, ElfW(Addr) p)
{
    return p < base ? base + p : p;
}

void fs_slot_write(void **slot, void *value, bool relro)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *start = (void *)((uintptr_t)slot & ~(page - 1));
    if (relro && mprotect(start, page, PROT_READ | PROT_WRITE) != 0) return;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    if (relro) mprotect(start, page, PROT_READ);
}

static void each_relocation(uintptr_t base, const ElfW(Rela) * rel, size_t n,
                            const ElfW(Sym) * symtab, const char *strtab, uintptr_t relro_lo,
                            uintptr_t relro_hi, fs_slot_visit visit, void *ctx)
{
    for (size_t i = 0; i < n; i++) {
        unsigned long type = ELF64_R_TYPE(rel[i].r_info);
        if (type != SLOT_JUMP && type != SLOT_GLOB) continue;
        const char *name = strtab + symtab[ELF64_R_SYM(rel[i].r_info)].st_name;
        void **slot = (void **)(base + rel[i].r_offset);
        visit(ctx, name, slot, (uintptr_t)slot >= relro_lo && (uintptr_t)slot < relro_hi);
    }
}

void fs_slots_each(const struct dl_phdr_info *info, fs_slot_visit visit, void *ctx)
{
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t base = info->dlpi_addr, relro_lo = 0, relro_hi = 0;

    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_lo = base + ph->p_vaddr;
            relro_hi = relro_lo + ph->p_memsz;
        }
    }
    if (!dyn) return;
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
    if (!symtab || !strtab) return;
    if (jmprel)
        each_relocation(base, jmprel, jmprel_size / sizeof *jmprel, symtab, strtab, relro_lo,
                        relro_hi, visit, ctx);
    if (rela)
        each_relocation(base, rela, rela_size / sizeof *rela, symtab, strtab, relro_lo, relro_hi,
                        visit, ctx);
}
