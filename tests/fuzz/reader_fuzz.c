/* reader_fuzz.c - the libFuzzer target for the trace reader and the
 * analyzer's commands over it (tests/fuzz/README.md).
 *
 * Each input is written to a memory file (memfd) and handed, by its
 * /proc/self/fd path, to the commands as a user would name a trace: dump,
 * report, top, leaks, timeline, diff, the three exports and replay, each
 * through its command_X entry point, so that the reading loop, the time
 * ordering and every command's visitor see it.
 *
 * Checksums guard the header and every block, and a mutated byte almost
 * never keeps them right: the reader would skip the block before any
 * decoder saw it. So every input is read twice: as it is (the recovery
 * paths: bad magic, checksum mismatches, torn tails), then resealed, its
 * checksums recomputed (docs/trace-format.md says what they cover), so that
 * mutations reach the block framing, zstd and the record decoders. An input
 * that is not a trace at all is read the second time as the payload of one
 * uncompressed block behind a valid header: records alone, the fuzzer's
 * quickest way into the decoders. The second time, diff compares the two.
 *
 * Native frames are not symbolised (--no-symbols): module paths come from
 * the input, and opening them is libdw's business, not the reader's. */
#include "analysis.h"
#include "format.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* the input as it is, and resealed or wrapped: diff reads them as A and B */
static int trace_fd[2] = {-1, -1};
static char trace_path[2][64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    for (int i = 0; i < 2; i++) {
        trace_fd[i] = memfd_create("fsdpshim-fuzz-trace", MFD_CLOEXEC);
        if (trace_fd[i] < 0) {
            perror("reader_fuzz: memfd_create");
            abort();
        }
        snprintf(trace_path[i], sizeof trace_path[i], "/proc/self/fd/%d", trace_fd[i]);
    }
    /* the commands' text goes nowhere (their stderr is libFuzzer's to
     * close: -close_fd_mask=2); the exports write to stdout */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null < 0 || dup2(null, STDOUT_FILENO) < 0) abort();
    close(null);
    return 0;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Recomputes the header's checksum and each block's (over its header but
 * the checksum field, and its stored payload), walking blocks as the
 * reader does: by their stored length, else to the next block magic. */
static void reseal(uint8_t *p, size_t n)
{
    static const uint8_t magic[4] = {'F', 'S', 'B', 'K'};
    size_t off = FS_FMT_HEADER_SIZE;

    put_le32(p + FS_FMT_HEADER_SIZE - 4, (uint32_t)crc32(0, p, FS_FMT_HEADER_SIZE - 4));
    while (off + FS_FMT_BLOCK_HDR_SIZE <= n) {
        uint8_t *b = p + off;
        uint32_t stored = get_le32(b + 4);
        if (get_le32(b) != FS_FMT_BLOCK_MAGIC) {
            uint8_t *next = memmem(b + 1, n - off - 1, magic, 4);
            if (!next) return;
            off = (size_t)(next - p);
            continue;
        }
        if (stored > n - off - FS_FMT_BLOCK_HDR_SIZE) return; /* a torn tail stays torn */
        uLong c = crc32(0, b, 20);
        c = crc32(c, b + 24, FS_FMT_BLOCK_HDR_SIZE - 24);
        c = crc32(c, b + FS_FMT_BLOCK_HDR_SIZE, stored);
        put_le32(b + 20, (uint32_t)c);
        off += FS_FMT_BLOCK_HDR_SIZE + stored;
    }
}

/* data as the records of one uncompressed block of thread 1, behind a
 * header that says it holds native and Python stacks. */
static uint8_t *wrap(const uint8_t *data, size_t size, size_t *n)
{
    fs_fmt_header h = {.version = FS_FMT_VERSION,
                       .min_reader = FS_FMT_MIN_READER,
                       .features = FS_FMT_FEAT_STACKS | FS_FMT_FEAT_PYTHON,
                       .pid = 1,
                       .rank = 0,
                       .trace_level = 3,
                       .frames = 64};
    uint8_t *p = malloc(FS_FMT_HEADER_SIZE + fs_fmt_block_bound(size));
    if (!p) abort();
    fs_fmt_header_encode(&h, p);
    *n = FS_FMT_HEADER_SIZE + fs_fmt_block_pack(NULL, 0, 1, 0, data, size, p + FS_FMT_HEADER_SIZE);
    return p;
}

typedef int (*command_fn)(int argc, char **argv);

static void run(command_fn command, char **argv)
{
    int argc = 0;
    while (argv[argc])
        argc++;
    command(argc, argv);
}

/* Writes data as trace i and reads it with every command (diff: against
 * trace 0). */
static void read_all(int i, const uint8_t *data, size_t size)
{
    char *p = trace_path[i], *a = trace_path[0];
    if (ftruncate(trace_fd[i], 0) != 0 || pwrite(trace_fd[i], data, size, 0) != (ssize_t)size)
        abort();
    run(command_dump, (char *[]){"dump", "--all", p, NULL});
    run(command_report, (char *[]){"report", "--no-symbols", p, NULL});
    run(command_top, (char *[]){"top", "--no-symbols", "--by", "python", "-n", "0", p, NULL});
    run(command_leaks, (char *[]){"leaks", "--no-symbols", "--by", "annotation", p, NULL});
    run(command_timeline, (char *[]){"timeline", p, NULL});
    run(command_diff, (char *[]){"diff", "--no-symbols", "--by", "frame", a, p, NULL});
    run(command_export, (char *[]){"export", "--memviz", "--no-symbols", "-o", "-", p, NULL});
    run(command_export, (char *[]){"export", "--chrome", "-o", "-", p, NULL});
    run(command_export, (char *[]){"export", "--folded", "--no-symbols", "-o", "-", p, NULL});
    run(command_replay,
        (char *[]){"replay", "--no-symbols", "--conf", "expandable_segments:true", p, NULL});
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t n = size;
    uint8_t *copy;

    read_all(0, data, size);
    if (size >= FS_FMT_HEADER_SIZE && !memcmp(data, FS_FMT_MAGIC, 8)) {
        if (!(copy = malloc(size))) abort();
        memcpy(copy, data, size);
        reseal(copy, size);
    } else {
        copy = wrap(data, size, &n);
    }
    read_all(1, copy, n);
    free(copy);
    return 0;
}
