/* render.h - the text every command prints for a trace's definitions: a
 * string, an annotation path, a native frame, a Python frame; and sizes and
 * durations as people read them. One place, so
 * that `dump`, `top` and the reports name things the same way. */
#ifndef FS_RENDER_H
#define FS_RENDER_H

#include "reader.h"
#include "symbols.h"

#include <stddef.h>
#include <stdint.h>

/* String id's text, "?" when unknown. */
const char *fs_render_str(const fs_reader *t, uint32_t id);

/* The annotation stack ending at node id as "outer/inner" into buf; the
 * length written (0: no annotation). */
size_t fs_render_annot(const fs_reader *t, uint32_t id, char *buf, size_t len);

/* Native frame pc as "MODULE+0xOFFSET" (or "0xPC" outside every module). */
size_t fs_render_frame(const fs_reader *t, uint64_t pc, char *buf, size_t len);

/* Native frame pc symbolised through sym (NULL: as fs_render_frame): one
 * line per source frame, innermost first, "FUNCTION at FILE:LINE" with
 * " (inlined)" on frames inlined into the next; "FUNCTION (MODULE+0xOFFSET)"
 * without line information; MODULE+0xOFFSET when nothing is known. */
size_t fs_render_frame_sym(const fs_reader *t, fs_symbols *sym, uint64_t pc, char *buf, size_t len);

/* What one source frame's line was made of, for a caller that sorts the
 * lines (fold.h): the module's path (NULL: in none), the function
 * (demangled; NULL: unknown), the source file (NULL: no line
 * information). */
typedef struct fs_render_source {
    const char *module, *function, *file;
} fs_render_source;

/* Native frame pc's lines, as fs_render_frame_sym writes them, handed one
 * source frame at a time to each(ctx, line, its parts), innermost first.
 * How many (at least one). */
size_t fs_render_frame_sources(const fs_reader *t, fs_symbols *sym, uint64_t pc,
                               void (*each)(void *ctx, const char *line,
                                            const fs_render_source *src),
                               void *ctx);

/* The length of the valid UTF-8 sequence at s (n bytes left), 0 when it is
 * not one: Python and JSON parsers decode strictly, and one stray byte of a
 * trace's string would make a whole output unreadable. */
size_t fs_utf8_len(const unsigned char *s, size_t n);

/* A trace as the commands name it: "rank R", or "pid P" for a trace
 * without a rank. */
void fs_render_trace_name(const fs_reader *t, char *buf, size_t len);

/* "1.5 MiB" */
void fs_human_bytes(uint64_t bytes, char *buf, size_t len);

/* ns as "12.3 \xc2\xb5s", "12.3 ms", "4.56 s" */
void fs_human_duration(uint64_t ns, char *buf, size_t len);

/* The "s" of a count's noun, "" for one: "%" PRIu64 " block%s", n,
 * fs_plural(n). */
const char *fs_plural(uint64_t n);

/* A Python frame as "FILE:LINE:FUNCTION". */
size_t fs_render_pyframe(const fs_reader *t, const fs_fmt_pyframe *f, char *buf, size_t len);

/* Where an allocation's Python frames go among its native ones, n of them
 * innermost first, to make one mixed stack as PyTorch's stacks="all": at
 * the first frame in the Python interpreter (libpython, or a python
 * executable), which runs them; after every native frame (n) when none is.
 * The native frames before that index, then the Python frames innermost
 * first, then the rest of the native frames. */
uint32_t fs_render_python_at(const fs_reader *t, const uint64_t *pcs, uint32_t n);

#endif /* FS_RENDER_H */
