/* format.h - the trace file format, shared by the writer (trace/, inside
 * libfsdpshim.so) and the reader (analysis/). docs/trace-format.md is the
 * prose version of this header.
 *
 * A trace file is a fixed header followed by blocks:
 *
 *   header   magic "FSDPSHIM", format version, oldest reader version that
 *            can read it, feature bits, pid, rank, host, clock base; crc32
 *   block    magic "FSBK", stored and raw payload length, flags (zstd),
 *            the thread that wrote it, the time of its first record, crc32
 *            over the header fields and the stored payload
 *   ...
 *
 * A block's payload is a sequence of records, each a one-byte kind followed
 * by LEB128 varints. Every block decodes on its own (the delta state starts
 * afresh), so a reader that meets a torn or corrupt block skips it and
 * continues at the next "FSBK" magic. As in memray, records stay small by
 * encoding times, addresses and totals as deltas against the previous
 * record of the block, and stacks, strings and annotation stacks by the id
 * of a definition record written once; a definition always precedes, in
 * file order, every event that names it.
 *
 * Everything multi-byte is little-endian. Nothing here allocates except the
 * zstd contexts the caller owns. */
#ifndef FS_FORMAT_H
#define FS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FS_FMT_MAGIC          "FSDPSHIM"
#define FS_FMT_VERSION        2
#define FS_FMT_MIN_READER     2
#define FS_FMT_BLOCK_MAGIC    0x4b425346u /* "FSBK" */
#define FS_FMT_HEADER_SIZE    256
#define FS_FMT_BLOCK_HDR_SIZE 32
#define FS_FMT_MAX_BLOCK      (1u << 20) /* raw payload bytes of one block, at most */
#define FS_FMT_MAX_DEVICES    64         /* devices whose totals are delta-coded */
#define FS_FMT_MAX_FRAMES     256        /* frames in one stack record, at most */
#define FS_FMT_MAX_STRING     4096       /* bytes of one string record, at most */
#define FS_FMT_MAX_RECORD     8192       /* bytes of one encoded record, at most */

/* ---- file header --------------------------------------------------------- */

enum fs_fmt_feature {
    FS_FMT_FEAT_STACKS = 1u << 0,   /* native stacks were recorded */
    FS_FMT_FEAT_PYTHON = 1u << 1,   /* Python stacks were recorded */
    FS_FMT_FEAT_SNAPSHOT = 1u << 2, /* an OOM / on-demand snapshot file, not a trace */
};

typedef struct fs_fmt_header {
    uint16_t version;       /* FS_FMT_VERSION of the writer */
    uint16_t min_reader;    /* the oldest reader version that can read the file */
    uint32_t features;      /* enum fs_fmt_feature bits */
    uint32_t pid;           /* the traced process */
    int32_t rank;           /* -1 when not known at open (a FS_REC_RANK record follows) */
    uint64_t clock_mono_ns; /* CLOCK_MONOTONIC at open: record times count from here */
    uint64_t clock_real_ns; /* CLOCK_REALTIME at the same instant: merges hosts */
    uint32_t trace_level;   /* 1 events, 2 stacks, 3 python */
    uint32_t frames;        /* native frames kept per stack, at most */
    char host[64];          /* NUL terminated */
    char exe[112];          /* the executable's path, NUL terminated, possibly cut */
} fs_fmt_header;

/* Writes the FS_FMT_HEADER_SIZE bytes of h into out. */
void fs_fmt_header_encode(const fs_fmt_header *h, uint8_t out[FS_FMT_HEADER_SIZE]);

/* Decodes a header. Returns NULL on success, else a static message: not a
 * trace, checksum mismatch, or written by a newer format than this reader. */
const char *fs_fmt_header_decode(const uint8_t in[FS_FMT_HEADER_SIZE], fs_fmt_header *h);

/* ---- blocks -------------------------------------------------------------- */

enum fs_fmt_block_flag {
    FS_FMT_BLOCK_ZSTD = 1u << 0, /* the stored payload is one zstd frame */
};

typedef struct fs_fmt_block {
    uint32_t stored_len; /* payload bytes in the file */
    uint32_t raw_len;    /* payload bytes once decompressed */
    uint32_t flags;      /* enum fs_fmt_block_flag */
    uint32_t tid;        /* kernel thread id of the writer of the events; 0 definitions */
    uint64_t time_ns;    /* the first record's time, since clock_mono_ns */
} fs_fmt_block;

/* Frames a raw payload into out: header then payload, zstd-compressed at
 * `zstd_level` when that is smaller (0: never compress). zctx is a
 * ZSTD_CCtx * the caller keeps (may be NULL when zstd_level is 0). out must
 * have room for fs_fmt_block_bound(raw_len). Returns the bytes written. */
size_t fs_fmt_block_bound(size_t raw_len);
size_t fs_fmt_block_pack(void *zctx, int zstd_level, uint32_t tid, uint64_t time_ns,
                         const uint8_t *raw, size_t raw_len, uint8_t *out);

/* Parses a block header at in (FS_FMT_BLOCK_HDR_SIZE bytes). Returns NULL
 * or a static message (bad magic, impossible lengths). */
const char *fs_fmt_block_parse(const uint8_t *in, fs_fmt_block *b);

/* Checks the block's checksum over its header and stored payload, then
 * writes the raw payload into raw (room for b->raw_len bytes, at most
 * FS_FMT_MAX_BLOCK). dctx is a ZSTD_DCtx * the caller keeps. Returns NULL
 * or a static message (checksum mismatch, bad zstd frame, length mismatch). */
const char *fs_fmt_block_unpack(void *dctx, const uint8_t *hdr, const fs_fmt_block *b,
                                const uint8_t *stored, uint8_t *raw);

/* ---- records --------------------------------------------------------------- */

typedef enum fs_fmt_kind {
    /* events: a fs_fmt_event */
    FS_REC_ALLOC = 1,      /* addr, size (rounded), requested, stack, pystack, annot */
    FS_REC_FREE_REQUESTED, /* the program freed the block (it may be reused later) */
    FS_REC_FREE_COMPLETED, /* the block is free for reuse (its stream uses completed) */
    FS_REC_SEGMENT_ALLOC,  /* device memory reserved from the device */
    FS_REC_SEGMENT_FREE,   /* device memory given back */
    FS_REC_SEGMENT_MAP,    /* expandable segment: pages mapped at addr */
    FS_REC_SEGMENT_UNMAP,  /* expandable segment: pages unmapped */
    FS_REC_OOM,            /* size requested; aux = largest free block, aux2 = the device's
                              free memory, aux3 = free cached bytes in other streams' pools,
                              aux4 = bytes held by pending frees */
    FS_REC_STREAM_CREATE,  /* stream = the new stream; aux = flags, aux2 = priority */
    FS_REC_STREAM_DESTROY, /* stream */
    FS_REC_POOL_HIT,       /* stream handed out by a stream pool, reused */
    FS_REC_COLLECTIVE,     /* aux = enum fs_fmt_coll, aux2 = communicator, addr, size */
    FS_REC_RL_WAIT_START,  /* rate limiter: aux = gathers in flight, aux2 = bytes */
    FS_REC_RL_WAIT_END,    /* rate limiter: aux = the fence waited for */
    FS_REC_ANNOT_PUSH,     /* annot = the stack after the push */
    FS_REC_ANNOT_POP,      /* annot = the stack after the pop */
    FS_REC_ANNOT_MARK,     /* name = the mark's message; annot = the current stack */
    FS_REC_SNAPSHOT,       /* name = the label */
    FS_REC_VMM,            /* the program's own VMM call (version 2): aux = enum fs_fmt_vmm,
                              aux2 = the handle, addr, size; stack (cuMemCreate) */
    FS_REC_EVENT_LAST = FS_REC_VMM,

    /* definitions and process facts */
    FS_REC_STRING = 64,  /* id, bytes */
    FS_REC_STACK,        /* id, native frames (innermost first) */
    FS_REC_PYSTACK,      /* id, Python frames (innermost first) */
    FS_REC_ANNOT,        /* id, parent annotation stack, domain string, name string */
    FS_REC_MODULE,       /* a loaded object: base, size, path string, build id */
    FS_REC_THREAD,       /* tid, name string */
    FS_REC_DROPPED,      /* events dropped because the disk could not keep up */
    FS_REC_RANK,         /* the rank became known: rank, world size */
    FS_REC_SNAP_SEGMENT, /* snapshot: a segment (device, stream, addr, size, aux = flags) */
    FS_REC_SNAP_BLOCK,   /* snapshot: a block (device, stream, addr, size, requested,
                            aux = enum fs_fmt_block_state, stack, pystack, annot) */
    FS_REC_CONFIG,       /* the allocator's configuration: string id (version 2) */
    FS_REC_DEVICE,       /* a device allocated on: device, its total memory (version 2) */
    FS_REC_KIND_LAST = FS_REC_DEVICE,
} fs_fmt_kind;

/* Bits of an FS_REC_ALLOC's aux above the pool (1 small, 2 large), and an
 * FS_REC_FREE_REQUESTED's aux (version 2). */
#define FS_FMT_ALLOC_STREAM_ORDERED 4u /* cudaMallocAsync, not cudaMalloc */
#define FS_FMT_FREE_STREAM_ORDERED  1u /* cudaFreeAsync, not cudaFree */
/* A trace-only attach (CUDA_INJECTION64_PATH, `fsdpshim attach`) saw the
 * free of a block allocated before it began: size and totals say nothing of
 * it (docs/trace-format.md). */
#define FS_FMT_FREE_BEFORE_TRACE 2u
/* A figure the writer could not learn (an OOM's device free memory). */
#define FS_FMT_UNKNOWN UINT64_MAX

typedef enum fs_fmt_coll {
    FS_COLL_ALL_GATHER = 1,
    FS_COLL_REDUCE_SCATTER,
    FS_COLL_ALL_REDUCE,
    FS_COLL_BROADCAST,
    FS_COLL_REDUCE,
    FS_COLL_ALL_TO_ALL,
    FS_COLL_SEND,
    FS_COLL_RECV,
    FS_COLL_GATHER,
    FS_COLL_SCATTER,
    FS_COLL_OTHER,
} fs_fmt_coll;

typedef enum fs_fmt_vmm {
    FS_VMM_CREATE = 1,   /* cuMemCreate: device, size, handle */
    FS_VMM_RELEASE,      /* cuMemRelease: handle */
    FS_VMM_MAP,          /* cuMemMap: addr, size, handle */
    FS_VMM_UNMAP,        /* cuMemUnmap: addr, size */
    FS_VMM_RESERVE,      /* cuMemAddressReserve: addr, size */
    FS_VMM_ADDRESS_FREE, /* cuMemAddressFree: addr, size */
} fs_fmt_vmm;

typedef enum fs_fmt_block_state {
    FS_BLOCK_LIVE = 1, /* allocated to the program */
    FS_BLOCK_CACHED,   /* free, in the cache */
    FS_BLOCK_PENDING,  /* freed by the program, waiting for its streams */
} fs_fmt_block_state;

/* One event (kinds up to FS_REC_EVENT_LAST) or snapshot entry. Fields a
 * kind does not use are 0; ids are 0 when absent. */
typedef struct fs_fmt_event {
    uint8_t kind;
    uint64_t time_ns; /* since the header's clock_mono_ns */
    int32_t device;   /* -1: none */
    uint64_t stream;  /* the program's stream handle (0: legacy default stream) */
    uint64_t addr;
    uint64_t size;
    uint64_t requested;  /* FS_REC_ALLOC, FS_REC_SNAP_BLOCK: bytes asked for (<= size) */
    uint64_t allocated;  /* the device's bytes in live blocks, after the event */
    uint64_t reserved;   /* the device's reserved bytes, after the event */
    uint32_t stack;      /* FS_REC_STACK id */
    uint32_t pystack;    /* FS_REC_PYSTACK id */
    uint32_t annot;      /* FS_REC_ANNOT id: the thread's annotation stack */
    uint32_t name;       /* FS_REC_STRING id */
    uint64_t aux, aux2;  /* per kind, see fs_fmt_kind */
    uint64_t aux3, aux4; /* per kind (version 2) */
} fs_fmt_event;

typedef struct fs_fmt_pyframe {
    uint32_t file;     /* string id */
    uint32_t function; /* string id */
    uint32_t line;
} fs_fmt_pyframe;

/* Any record, as the decoder returns it. Pointers point into the block's
 * raw payload or into the decoder, valid until the next call. */
typedef struct fs_fmt_record {
    uint8_t kind;
    fs_fmt_event ev; /* events and snapshot entries */
    uint32_t id;     /* STRING, STACK, PYSTACK, ANNOT: the id defined */
    union {
        struct {
            const char *bytes; /* not NUL terminated */
            uint32_t len;
        } string;
        struct {
            uint32_t n;
            uint64_t *frames; /* return addresses, innermost first */
        } stack;
        struct {
            uint32_t n;
            fs_fmt_pyframe *frames; /* innermost first */
        } pystack;
        struct {
            uint32_t parent; /* 0: the root */
            uint32_t domain; /* string id, 0: the default domain */
            uint32_t name;   /* string id */
        } annot;
        struct {
            uint64_t base, size; /* the object's mapped range */
            uint32_t path;       /* string id */
            uint32_t build_id_len;
            const uint8_t *build_id;
        } module;
        struct {
            uint32_t tid;
            uint32_t name; /* string id */
        } thread;
        struct {
            uint64_t count;   /* events lost since the previous FS_REC_DROPPED */
            uint64_t time_ns; /* when the drops were counted */
        } dropped;
        struct {
            int32_t rank;
            int32_t world;
        } rank;
        struct {
            uint32_t text; /* string id: the configuration, as PYTORCH_CUDA_ALLOC_CONF */
        } config;
        struct {
            int32_t device;
            uint64_t total; /* bytes of device memory; 0: not known */
        } device;
    } u;
} fs_fmt_record;

/* The encoder's delta state for one block; zero it (fs_fmt_enc_reset) at
 * every block start. */
typedef struct fs_fmt_enc {
    uint64_t time_ns;
    int32_t device;
    uint64_t stream, addr;
    uint64_t allocated[FS_FMT_MAX_DEVICES], reserved[FS_FMT_MAX_DEVICES];
} fs_fmt_enc;

void fs_fmt_enc_reset(fs_fmt_enc *e, uint64_t block_time_ns);

/* Each encoder appends one record at out (room for FS_FMT_MAX_RECORD bytes)
 * and returns the bytes written. Strings longer than FS_FMT_MAX_STRING and
 * stacks deeper than FS_FMT_MAX_FRAMES are cut. */
size_t fs_fmt_put_event(fs_fmt_enc *e, const fs_fmt_event *ev, uint8_t *out);
size_t fs_fmt_put_string(uint32_t id, const char *s, size_t len, uint8_t *out);
size_t fs_fmt_put_stack(uint32_t id, const uint64_t *frames, uint32_t n, uint8_t *out);
size_t fs_fmt_put_pystack(uint32_t id, const fs_fmt_pyframe *frames, uint32_t n, uint8_t *out);
size_t fs_fmt_put_annot(uint32_t id, uint32_t parent, uint32_t domain, uint32_t name, uint8_t *out);
size_t fs_fmt_put_module(uint64_t base, uint64_t size, uint32_t path, const uint8_t *build_id,
                         uint32_t build_id_len, uint8_t *out);
size_t fs_fmt_put_thread(uint32_t tid, uint32_t name, uint8_t *out);
size_t fs_fmt_put_dropped(uint64_t count, uint64_t time_ns, uint8_t *out);
size_t fs_fmt_put_rank(int32_t rank, int32_t world, uint8_t *out);
size_t fs_fmt_put_config(uint32_t text, uint8_t *out);
size_t fs_fmt_put_device(int32_t device, uint64_t total, uint8_t *out);

/* The decoder over one block's raw payload. */
typedef struct fs_fmt_dec {
    const uint8_t *p, *end;
    fs_fmt_enc state; /* the same delta state the encoder kept */
    uint64_t frames[FS_FMT_MAX_FRAMES];
    fs_fmt_pyframe pyframes[FS_FMT_MAX_FRAMES];
} fs_fmt_dec;

void fs_fmt_dec_init(fs_fmt_dec *d, const uint8_t *raw, size_t len, uint64_t block_time_ns);

/* Decodes the next record into r. Returns 1 for a record, 0 at the end of
 * the block, -1 when the payload is malformed (*err: a static message; the
 * rest of the block is unusable). */
int fs_fmt_next(fs_fmt_dec *d, fs_fmt_record *r, const char **err);

/* The stable lower-case name of a record kind ("alloc", "free_requested",
 * ...), or NULL for an unknown kind. */
const char *fs_fmt_kind_name(unsigned kind);
const char *fs_fmt_coll_name(unsigned coll);
/* The driver entry point of an FS_REC_VMM ("cuMemCreate", ...), or NULL. */
const char *fs_fmt_vmm_name(unsigned op);

#endif /* FS_FORMAT_H */
