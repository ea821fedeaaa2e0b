/* output.c - what the formats of `fsdpshim export` share (export.h): opening
 * a trace with its warnings on the progress line, where each output goes
 * (stdout, a file, or one file per trace through -o's pattern or a
 * directory), creating and finishing it, and the checks of text that every
 * textual format needs (valid UTF-8). The command line is export.c's; each
 * format is a file of its own that calls these, never the command. */
#include "export.h"
#include "progress.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void fs_export_warn(void *ctx, const char *line)
{
    (void)ctx;
    fs_progress_warn("export", line);
}

fs_reader *fs_export_open(const char *path)
{
    char err[4200];
    fs_reader *t = fs_reader_open(path, err, sizeof err);
    if (!t)
        fs_progress_warn("export", err);
    else
        fs_progress_watch(t);
    return t;
}

bool fs_export_to_stdout(const char *out)
{
    return !out || !strcmp(out, "-");
}

bool fs_export_to_directory(const char *out)
{
    struct stat st;
    size_t n = strlen(out);
    return (n && out[n - 1] == '/') || (stat(out, &st) == 0 && S_ISDIR(st.st_mode));
}

void fs_export_path(const fs_export_opts *o, const char *trace, const fs_reader *t, const char *ext,
                    char *path, size_t len)
{
    const char *base = strrchr(trace, '/'), *dot;
    size_t stem, at = 0;
    int rank = fs_reader_rank(t);
    unsigned pid = fs_reader_header(t)->pid;

    path[0] = '\0';
    if (fs_export_to_stdout(o->out)) return;
    base = base ? base + 1 : trace;
    dot = strrchr(base, '.');
    stem = dot && dot != base ? (size_t)(dot - base) : strlen(base);
    if (fs_export_to_directory(o->out)) {
        size_t n = strlen(o->out);
        snprintf(path, len, "%s%s%.*s.%s", o->out, o->out[n - 1] == '/' ? "" : "/", (int)stem, base,
                 ext);
        return;
    }
    for (const char *c = o->out; *c && at + 1 < len; c++) {
        int n;
        if (*c != '%' || !c[1]) {
            path[at++] = *c;
            continue;
        }
        switch (*++c) {
        case 'r':
            n = rank >= 0 ? snprintf(path + at, len - at, "%d", rank)
                          : snprintf(path + at, len - at, "%u", pid);
            break;
        case 'p':
            n = snprintf(path + at, len - at, "%u", pid);
            break;
        case 'n':
            n = snprintf(path + at, len - at, "%.*s", (int)stem, base);
            break;
        default: /* %% and any other: the character itself */
            n = snprintf(path + at, len - at, "%c", *c);
            break;
        }
        at += n > 0 && (size_t)n < len - at ? (size_t)n : 0;
    }
    path[at < len ? at : len - 1] = '\0';
}

FILE *fs_export_create(const char *path)
{
    if (!path[0]) return stdout;
    FILE *f = fopen(path, "wb");
    if (!f) fprintf(stderr, "fsdpshim export: cannot write %s: %s\n", path, strerror(errno));
    return f;
}

bool fs_export_finish(FILE *f, const char *path)
{
    bool ok = fflush(f) == 0 && !ferror(f);
    int err = errno;
    if (f != stdout && fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok)
        fprintf(stderr, "fsdpshim export: writing %s: %s\n", path[0] ? path : "stdout",
                strerror(err));
    return ok;
}
