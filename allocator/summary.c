/* summary.c - the statistics as text in the shape of
 * torch.cuda.memory_summary(): one table per device (or the sum), a row per
 * metric and pool kind, columns current / peak / allocated / freed, sizes
 * scaled to a unit chosen from the peak so each row reads alike. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

typedef struct out {
    char *buf;
    size_t len, need;
} out;

static void put(out *o, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = o->need < o->len ? o->len - o->need : 0;
    int n = vsnprintf(room ? o->buf + o->need : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) o->need += (size_t)n;
}

#define RULE  "|---------------------------------------------------------------------------|\n"
#define DRULE "|===========================================================================|\n"

static void fmt_size(char *b, size_t n, int64_t v, int64_t pref)
{
    static const char *unit[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    double p = (double)(pref > 0 ? pref : 0);
    while (u < 5 && p >= 768.0 * 1024) {
        v /= 1024;
        p /= 1024;
        u++;
    }
    snprintf(b, n, "%6lld %s", (long long)v, unit[u]);
}

static void fmt_count(char *b, size_t n, int64_t v, int64_t pref)
{
    static const char *unit[] = {" ", "K", "M"};
    int u = 0;
    while (u < 2 && pref >= 750 * 1000) {
        v /= 1000;
        pref /= 1000;
        u++;
    }
    snprintf(b, n, "%7lld %s ", (long long)v, unit[u]);
}

static void center(out *o, const char *text)
{
    int n = (int)strlen(text);
    int left = (75 - n) / 2;
    put(o, "|%*s%s%*s|\n", left, "", text, 75 - n - left, "");
}

/* As torch.cuda.memory_summary: each column's unit follows the value of
 * the same column in the row for all pools. */
static void rows(out *o, const char *name, const fs_stat st[FS_SIZE_CLASSES], bool bytes)
{
    static const char *sub[FS_SIZE_CLASSES] = {NULL, "      from small pool",
                                               "      from large pool"};
    static const int order[FS_SIZE_CLASSES] = {FS_SIZE_ALL, FS_SIZE_LARGE, FS_SIZE_SMALL};
    const fs_stat *all = &st[FS_SIZE_ALL];
    int64_t pref[4] = {all->current, all->peak, all->allocated, all->freed};
    for (int i = 0; i < FS_SIZE_CLASSES; i++) {
        int k = order[i];
        const fs_stat *s = &st[k];
        char c[4][24];
        int64_t v[4] = {s->current, s->peak, s->allocated, s->freed};
        for (int j = 0; j < 4; j++) {
            if (bytes)
                fmt_size(c[j], sizeof c[j], v[j], pref[j]);
            else
                fmt_count(c[j], sizeof c[j], v[j], pref[j]);
        }
        put(o, "| %-21s | %s | %s | %s | %s |\n", k == FS_SIZE_ALL ? name : sub[k], c[0], c[1],
            c[2], c[3]);
    }
    put(o, RULE);
}

/* A figure without pool kinds, as PyTorch's oversize rows. */
static void row(out *o, const char *name, const fs_stat *s)
{
    char c[4][24];
    int64_t v[4] = {s->current, s->peak, s->allocated, s->freed};
    for (int j = 0; j < 4; j++)
        fmt_count(c[j], sizeof c[j], v[j], v[j]);
    put(o, "| %-21s | %s | %s | %s | %s |\n", name, c[0], c[1], c[2], c[3]);
    put(o, RULE);
}

size_t fs_alloc_summary(fs_allocator *a, int device, char *buf, size_t len)
{
    fs_alloc_stats st;
    fs_alloc_get_stats(a, device, &st);
    out o = {buf, len, 0};
    char title[80];
    if (device >= 0)
        snprintf(title, sizeof title, "fsdpshim CUDA memory summary, device ID %d", device);
    else
        snprintf(title, sizeof title, "fsdpshim CUDA memory summary, all devices");
    put(&o, DRULE);
    center(&o, title);
    put(&o, RULE);
    put(&o, "| %18s: %-14lld | %18s: %-15lld |\n", "CUDA OOMs", (long long)st.num_ooms,
        "cudaMalloc retries", (long long)st.num_alloc_retries);
    put(&o, "| %18s: %-14lld | %18s: %-15lld |\n", "device allocs", (long long)st.num_device_alloc,
        "device frees", (long long)st.num_device_free);
    put(&o, "| %18s: %-14lld | %18s: %-15lld |\n", "sync all streams",
        (long long)st.num_sync_all_streams, "pending frees", (long long)st.pending_frees);
    put(&o, DRULE);
    put(&o, "|        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  |\n");
    put(&o, RULE);
    rows(&o, "Allocated memory", st.allocated_bytes, true);
    rows(&o, "Active memory", st.active_bytes, true);
    rows(&o, "Requested memory", st.requested_bytes, true);
    rows(&o, "GPU reserved memory", st.reserved_bytes, true);
    rows(&o, "Non-releasable memory", st.inactive_split_bytes, true);
    rows(&o, "Allocations", st.allocation, false);
    rows(&o, "Active allocs", st.active, false);
    rows(&o, "GPU reserved segments", st.segment, false);
    rows(&o, "Non-releasable allocs", st.inactive_split, false);
    row(&o, "Oversize allocations", &st.oversize_allocations);
    row(&o, "Oversize GPU segments", &st.oversize_segments);
    char lf[24], pb[24];
    fmt_size(lf, sizeof lf, st.largest_free_block, st.largest_free_block);
    fmt_size(pb, sizeof pb, st.pending_free_bytes, st.pending_free_bytes);
    put(&o, "| %-21s | %s | %-21s | %s |\n", "Largest free block", lf, "Pending free memory", pb);
    put(&o, DRULE);
    if (len) buf[o.need < len ? o.need : len - 1] = '\0';
    return o.need;
}
