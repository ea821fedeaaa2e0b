/* snapshot.c - writing snapshot files (snapshot.h): synchronously, from the
 * thread that asked (an out-of-memory report, the public API), since the
 * moment matters and the file is written once. Blocks are compressed like
 * the trace's. */
#include "snapshot.h"
#include "trace_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define BLOCK (64u << 10)

typedef struct out {
    int fd;
    bool failed;
    void *zctx;
    uint8_t *packed; /* one packed block */
} out;

static void put(out *o, const uint8_t *p, size_t len)
{
    while (len && !o->failed) {
        ssize_t n = write(o->fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            o->failed = true;
            return;
        }
        p += n;
        len -= (size_t)n;
    }
}

static void put_block(void *ctx, const uint8_t *raw, size_t len)
{
    out *o = ctx;
    put(o, o->packed, fs_fmt_block_pack(o->zctx, 1, 0, 0, raw, len, o->packed));
}

static void put_header(out *o)
{
    uint8_t raw[FS_FMT_HEADER_SIZE];
    struct timespec real;
    fs_fmt_header h = {
        .version = FS_FMT_VERSION,
        .min_reader = FS_FMT_MIN_READER,
        .features = FS_FMT_FEAT_SNAPSHOT,
        .pid = (uint32_t)getpid(),
        .rank = fs_trace_level() ? fs_trace_g.rank : -1,
        .trace_level = (uint32_t)fs_trace_level(),
        .frames = fs_trace_level() ? fs_trace_g.settings.frames : 0,
    };
    ssize_t n;

    if (fs_trace_level()) { /* the trace's clock, so both line up */
        h.clock_mono_ns = fs_trace_g.mono_base;
        h.clock_real_ns = fs_trace_g.real_base;
    } else {
        h.clock_mono_ns = fs_trace_mono_ns();
        clock_gettime(CLOCK_REALTIME, &real);
        h.clock_real_ns = (uint64_t)real.tv_sec * 1000000000u + (uint64_t)real.tv_nsec;
    }
    if (h.trace_level >= FS_TRACE_STACKS) h.features |= FS_FMT_FEAT_STACKS;
    if (h.trace_level >= FS_TRACE_PYTHON) h.features |= FS_FMT_FEAT_PYTHON;
    gethostname(h.host, sizeof h.host - 1);
    n = readlink("/proc/self/exe", h.exe, sizeof h.exe - 1);
    h.exe[n > 0 ? n : 0] = 0;
    fs_fmt_header_encode(&h, raw);
    put(o, raw, sizeof raw);
}

/* A new file: kind-host-pid-N.fst, N counting this process's snapshots. */
static int create(const char *dir, const char *kind, char *path, size_t len)
{
    static atomic_uint serial;
    char host[64] = "localhost";

    gethostname(host, sizeof host - 1);
    for (int tries = 0; tries < 100; tries++) {
        snprintf(path, len, "%s/%s-%s-%d-%u.fst", dir && *dir ? dir : ".", kind, host,
                 (int)getpid(), atomic_fetch_add(&serial, 1) + 1);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    return -1;
}

bool fs_snapshot_write(const char *dir, const char *kind, const fs_fmt_event *entries, size_t n,
                       char *path, size_t pathlen)
{
    out o = {.fd = create(dir, kind, path, pathlen)};
    uint8_t *raw;
    size_t len = 0;
    fs_fmt_enc enc;

    if (o.fd < 0) {
        snprintf(path, pathlen, "cannot create a snapshot file in %s: %s", dir ? dir : ".",
                 strerror(errno));
        return false;
    }
    fchmod(o.fd, 0600);
    o.zctx = ZSTD_createCCtx();
    o.packed = malloc(fs_fmt_block_bound(BLOCK + FS_FMT_MAX_RECORD));
    raw = malloc(BLOCK + FS_FMT_MAX_RECORD);
    if (!o.packed || !raw) o.failed = true;
    put_header(&o);
    if (fs_trace_level() && !o.failed) fs_trace_definitions(put_block, &o);
    fs_fmt_enc_reset(&enc, 0);
    for (size_t i = 0; i < n && !o.failed; i++) {
        len += fs_fmt_put_event(&enc, &entries[i], raw + len);
        if (len >= BLOCK || i + 1 == n) {
            put_block(&o, raw, len);
            len = 0;
            fs_fmt_enc_reset(&enc, 0);
        }
    }
    if (close(o.fd) != 0) o.failed = true;
    ZSTD_freeCCtx(o.zctx);
    free(o.packed);
    free(raw);
    if (o.failed) {
        snprintf(path + strlen(path), pathlen - strlen(path), ": write failed");
        return false;
    }
    return true;
}
