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
    fs_fmt_header h;

    fs_trace_header_of(&h, FS_FMT_FEAT_SNAPSHOT, fs_trace_defs_level());
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
    if (fs_trace_defs_level() && !o.failed) fs_trace_definitions(put_block, &o);
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
