/* slots.h - the GOT slots through which a loaded object reaches functions
 * it imports (slots.c): found by the symbol each names, written through
 * RELRO. attach/got.c points them at trace-only functions for
 * `fsdpshim attach`; python/gil.c at the shim's GIL hooks where the
 * interpreter's own definitions come ahead of the shim's. */
#ifndef FS_SLOTS_H
#define FS_SLOTS_H

#include <link.h>
#include <stdbool.h>

/* One slot: the symbol it names, where it is, whether it lies in the
 * object's RELRO segment (read-only once the loader is done with it). */
typedef void (*fs_slot_visit)(void *ctx, const char *name, void **slot, bool relro);

/* Calls visit for every R_*_JUMP_SLOT and R_*_GLOB_DAT relocation of the
 * object info describes (a dl_iterate_phdr entry): the PLT's slots and the
 * addresses of functions the object takes. Nothing for an object without
 * a dynamic section or symbol table. */
void fs_slots_each(const struct dl_phdr_info *info, fs_slot_visit visit, void *ctx);

/* Writes value into slot, atomically for a thread calling through it; a
 * slot in RELRO is made writable for the write and read-only again (left
 * as it was when that cannot be done). */
void fs_slot_write(void **slot, void *value, bool relro);

#endif /* FS_SLOTS_H */
