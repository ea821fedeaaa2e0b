/* symbols.h - native frames to functions, files and lines, offline, with
 * elfutils' libdw (DWARF line tables and inlining scopes, the ELF symbol
 * table where there is no DWARF), C++ names demangled.
 *
 * Each module is opened once per run (keyed by path and GNU build id) and
 * each (module, offset) resolved once however often it appears, so that a
 * trace with millions of allocations symbolises in the time its unique
 * frames take. A module that cannot be opened, or whose build id differs
 * from the one the trace recorded (the library was rebuilt or upgraded),
 * gets one warning and its frames stay MODULE+0xOFFSET: never a failure.
 * One fs_symbols may serve several threads at once (the ranks of a job
 * read side by side): lookups take its lock. */
#ifndef FS_SYMBOLS_H
#define FS_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fs_symbols fs_symbols;

/* One source frame. An address inside inlined code stands for several:
 * the inlined function first, then each caller it was inlined into, the
 * last being the function the address belongs to. */
typedef struct fs_symbol_frame {
    const char *function; /* demangled; NULL when unknown */
    const char *file;     /* NULL when there is no line information */
    unsigned line;
    bool inlined; /* this frame was inlined into the next one */
} fs_symbol_frame;

/* warn gets one line per module that cannot be symbolised. */
fs_symbols *fs_symbols_create(void (*warn)(void *ctx, const char *line), void *ctx);
void fs_symbols_destroy(fs_symbols *s);

/* The source frames of return address `offset` bytes into the module at
 * path (its build id as the trace recorded it; len 0: unknown), looked up
 * at offset - 1, the call. Returns how many (0: unknown, print the module
 * and offset); *frames stays valid until fs_symbols_destroy. */
size_t fs_symbols_resolve(fs_symbols *s, const char *path, const uint8_t *build_id,
                          size_t build_id_len, uint64_t offset, const fs_symbol_frame **frames);

#endif /* FS_SYMBOLS_H */
