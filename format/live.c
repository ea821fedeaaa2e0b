/* live.c - the live statistics page's names and its seqlock (live.h):
 * one implementation for the writer in the preload library and the reader
 * in the analyzer.
 *
 * The seqlock is written with C11 atomics and no standalone fence (which
 * ThreadSanitizer does not model): the writer makes `seq` odd, stores every
 * payload word with release, then publishes the even `seq` with a release
 * store; the reader loads `seq` with acquire, loads the words with acquire,
 * and loads `seq` again. A word read from an update carries the odd `seq`
 * stored before it (release/acquire on the word), so the second load can
 * no longer return the first's value: equal even values mean the copy holds
 * one whole update. The page's words are only ever touched atomically, so a
 * reader racing the writer reads stale or torn data, never undefined
 * behaviour, and the check throws the torn copy away. Release and acquire
 * cost nothing on x86 and one instruction each on Arm, for a few hundred
 * words ten times a second. */
#include "live.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(fs_live_proc) % 8 == 0, "the payload is 64-bit words");
_Static_assert(sizeof(fs_live_device) % 8 == 0, "the payload is 64-bit words");
_Static_assert(sizeof(fs_live_head) % 8 == 0, "the payload starts on a word");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "page words must be lock-free atomics");

size_t fs_live_page_size(uint32_t ndev)
{
    return sizeof(fs_live_head) + sizeof(fs_live_proc) + (size_t)ndev * sizeof(fs_live_device);
}

void fs_live_name(char *buf, size_t len, unsigned uid, int pid)
{
    snprintf(buf, len, "/" FS_LIVE_PREFIX "%u-%d", uid, pid);
}

/* A decimal number of at most 10 digits, all of s up to `end`. */
static bool parse_decimal(const char *s, char end, const char **rest, unsigned long *out)
{
    unsigned long v = 0;
    int digits = 0;

    for (; *s >= '0' && *s <= '9' && digits < 10; s++, digits++)
        v = v * 10 + (unsigned long)(*s - '0');
    if (!digits || *s != end) return false;
    *rest = s;
    *out = v;
    return true;
}

bool fs_live_parse_name(const char *entry, unsigned *uid, int *pid)
{
    const size_t plen = sizeof FS_LIVE_PREFIX - 1;
    unsigned long u, p;
    const char *s;

    if (strncmp(entry, FS_LIVE_PREFIX, plen) != 0) return false;
    if (!parse_decimal(entry + plen, '-', &s, &u) || u > 0xffffffffu) return false;
    if (!parse_decimal(s + 1, '\0', &s, &p) || p == 0 || p > 0x7fffffffu) return false;
    *uid = (unsigned)u;
    *pid = (int)p;
    return true;
}

uint64_t fs_live_start_ticks(int pid)
{
    char path[64], buf[1024];
    FILE *f;
    size_t n;

    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    if (!(f = fopen(path, "re"))) return 0;
    n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* the command name (field 2) is in parentheses and may hold anything;
     * the fields after its last ')' are numbers from field 3 on */
    const char *s = strrchr(buf, ')');
    if (!s) return 0;
    for (int field = 2; field < 22; field++) {
        s = strchr(s + 1, ' ');
        if (!s) return 0;
    }
    return strtoull(s + 1, NULL, 10);
}

void fs_live_publish(fs_live_head *h, const fs_live_proc *proc, const fs_live_device *devs)
{
    const size_t pw = sizeof *proc / 8, dw = sizeof *devs / 8;
    uint64_t s = atomic_load_explicit(&h->seq, memory_order_relaxed);
    uint64_t w;

    atomic_store_explicit(&h->seq, s + 1, memory_order_relaxed);
    for (size_t i = 0; i < pw; i++) {
        memcpy(&w, (const char *)proc + 8 * i, 8);
        atomic_store_explicit(&h->payload[i], w, memory_order_release);
    }
    for (size_t i = 0; i < h->ndev * dw; i++) {
        memcpy(&w, (const char *)devs + 8 * i, 8);
        atomic_store_explicit(&h->payload[pw + i], w, memory_order_release);
    }
    atomic_store_explicit(&h->seq, s + 2, memory_order_release);
}

const char *fs_live_check(fs_live_head *h, size_t size)
{
    if (size < sizeof *h) return "too small to be a statistics page";
    uint64_t magic = atomic_load_explicit(&h->magic, memory_order_acquire);
    if (magic == 0) return "being made (try again)";
    if (magic != FS_LIVE_MAGIC) return "not an fsdpshim statistics page";
    if (h->version > FS_LIVE_VERSION) return "written by a newer fsdpshim (page version)";
    if (h->version < FS_LIVE_VERSION) return "written by an older fsdpshim (page version)";
    if (h->head_size != sizeof *h || h->proc_size % 8 || h->device_size % 8 || h->proc_size < 8 ||
        h->device_size < 8 || h->ndev > FS_LIVE_DEVICES)
        return "a statistics page with impossible sizes";
    if ((size_t)h->head_size + h->proc_size + (size_t)h->ndev * h->device_size > size)
        return "a statistics page cut short";
    return NULL;
}

/* Copies `words` words from the payload at word `from` into dst. */
static void copy_out(fs_live_head *h, size_t from, void *dst, size_t words)
{
    for (size_t i = 0; i < words; i++) {
        uint64_t w = atomic_load_explicit(&h->payload[from + i], memory_order_acquire);
        memcpy((char *)dst + 8 * i, &w, 8);
    }
}

bool fs_live_read(fs_live_head *h, fs_live_proc *proc, fs_live_device *devs, int tries)
{
    const size_t pw = h->proc_size / 8, dw = h->device_size / 8;
    const size_t keep_p = pw < sizeof *proc / 8 ? pw : sizeof *proc / 8;
    const size_t keep_d = dw < sizeof *devs / 8 ? dw : sizeof *devs / 8;

    for (int t = 0; t < tries; t++) {
        uint64_t s1 = atomic_load_explicit(&h->seq, memory_order_acquire);
        if (s1 & 1) {
            sched_yield(); /* mid-update: the writer needs microseconds */
            continue;
        }
        memset(proc, 0, sizeof *proc);
        memset(devs, 0, h->ndev * sizeof *devs);
        copy_out(h, 0, proc, keep_p);
        for (uint32_t d = 0; d < h->ndev; d++)
            copy_out(h, pw + d * dw, &devs[d], keep_d);
        if (atomic_load_explicit(&h->seq, memory_order_relaxed) == s1) return true;
    }
    return false;
}
