/* render.c - definitions as text (render.h). */
#include "render.h"

#include "fold.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

const char *fs_render_str(const fs_reader *t, uint32_t id)
{
    const char *s = id ? fs_reader_string(t, id, NULL) : NULL;
    return s ? s : "?";
}

/* snprintf's count, capped to what fits, so that lengths add up safely */
static size_t fitted(int n, size_t len)
{
    if (n < 0) return 0;
    return (size_t)n < len ? (size_t)n : (len ? len - 1 : 0);
}

size_t fs_render_annot(const fs_reader *t, uint32_t id, char *buf, size_t len)
{
    uint32_t chain[FS_READER_MAX_NESTING], parent, domain, name;
    int n = fs_reader_annot_chain(t, id, chain);
    size_t at = 0;

    if (len) buf[0] = '\0';
    for (int i = 0; i < n && at < len; i++) {
        fs_reader_annot(t, chain[i], &parent, &domain, &name);
        at += fitted(
            snprintf(buf + at, len - at, "%s%s", fs_render_str(t, name), i + 1 < n ? "/" : ""),
            len - at);
    }
    return at;
}

size_t fs_render_frame(const fs_reader *t, uint64_t pc, char *buf, size_t len)
{
    uint64_t off;
    const fs_reader_module *m = fs_reader_module_of(t, pc, &off);

    if (m) return fitted(snprintf(buf, len, "%s+0x%" PRIx64, fs_render_str(t, m->path), off), len);
    return fitted(snprintf(buf, len, "0x%" PRIx64, pc), len);
}

const char *fs_plural(uint64_t n)
{
    return n == 1 ? "" : "s";
}

size_t fs_render_pyframe(const fs_reader *t, const fs_fmt_pyframe *f, char *buf, size_t len)
{
    return fitted(snprintf(buf, len, "%s:%u:%s", fs_render_str(t, f->file), f->line,
                           fs_render_str(t, f->function)),
                  len);
}

size_t fs_render_frame_sources(const fs_reader *t, fs_symbols *sym, uint64_t pc,
                               void (*each)(void *ctx, const char *line,
                                            const fs_render_source *src),
                               void *ctx)
{
    uint64_t off;
    const fs_reader_module *m = fs_reader_module_of(t, pc, &off);
    const char *path = m ? fs_render_str(t, m->path) : NULL;
    const fs_symbol_frame *f;
    size_t n = m && sym ? fs_symbols_resolve(sym, path, m->build_id, m->build_id_len, off, &f) : 0;
    char line[8192];

    if (!n) {
        fs_render_frame(t, pc, line, sizeof line);
        each(ctx, line, &(fs_render_source){path, NULL, NULL});
        return 1;
    }
    for (size_t i = 0; i < n; i++) {
        const char *fn = f[i].function ? f[i].function : "??";
        if (f[i].file)
            snprintf(line, sizeof line, "%s at %s:%u%s", fn, f[i].file, f[i].line,
                     f[i].inlined ? " (inlined)" : "");
        else
            snprintf(line, sizeof line, "%s (%s+0x%" PRIx64 ")", fn, path, off);
        each(ctx, line, &(fs_render_source){path, f[i].function, f[i].file});
    }
    return n;
}

/* fs_render_frame_sym's text being built */
typedef struct joined {
    char *buf;
    size_t len, at;
} joined;

static void join_line(void *ctx, const char *line, const fs_render_source *src)
{
    joined *j = ctx;
    (void)src;
    if (j->at && j->at < j->len)
        j->at += fitted(snprintf(j->buf + j->at, j->len - j->at, "\n"), j->len - j->at);
    if (j->at < j->len)
        j->at += fitted(snprintf(j->buf + j->at, j->len - j->at, "%s", line), j->len - j->at);
}

size_t fs_render_frame_sym(const fs_reader *t, fs_symbols *sym, uint64_t pc, char *buf, size_t len)
{
    joined j = {buf, len, 0};
    if (len) buf[0] = '\0';
    fs_render_frame_sources(t, sym, pc, join_line, &j);
    return j.at;
}

/* Whether pc lies in the Python interpreter (fold.h) */
static bool in_interpreter(const fs_reader *t, uint64_t pc)
{
    uint64_t off;
    const fs_reader_module *mod = fs_reader_module_of(t, pc, &off);
    return mod && fs_fold_interpreter(fs_render_str(t, mod->path));
}

uint32_t fs_render_python_at(const fs_reader *t, const uint64_t *pcs, uint32_t n)
{
    uint32_t i = 0;
    while (i < n && !in_interpreter(t, pcs[i]))
        i++;
    return i;
}

void fs_human_bytes(uint64_t bytes, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void fs_human_duration(uint64_t ns, char *buf, size_t len)
{
    if (ns < 1000000)
        snprintf(buf, len, "%.1f \xc2\xb5s", (double)ns / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, len, "%.1f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.2f s", (double)ns / 1e9);
}

size_t fs_utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    unsigned lo = 0x80, hi = 0xbf;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf)
        len = 2;
    else if (s[0] >= 0xe0 && s[0] <= 0xef)
        len = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4)
        len = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    if (len > n || s[1] < lo || s[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (s[i] < 0x80 || s[i] > 0xbf) return 0;
    return len;
}

void fs_render_trace_name(const fs_reader *t, char *buf, size_t len)
{
    int rank = fs_reader_rank(t);
    if (rank >= 0)
        snprintf(buf, len, "rank %d", rank);
    else
        snprintf(buf, len, "pid %u", fs_reader_header(t)->pid);
}
