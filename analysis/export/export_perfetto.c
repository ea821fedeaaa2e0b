/* export_perfetto.c - `fsdpshim export --perfetto`: traces in Perfetto's own
 * protobuf format, a Trace message (TracePacket after TracePacket), which
 * ui.perfetto.dev and trace_processor open however long the trace, where
 * the Chrome JSON of export_chrome.c is loaded whole (docs/cli.md).
 *
 * Each trace (rank) is a process, "rank R (pid P on HOST)", with:
 * - counter tracks of bytes: per device, allocated and reserved as the
 *   allocator reported them with each event; per stream, the blocks the
 *   program allocated on it and has not freed, and the segments made for
 *   it; for a rank on several devices, their sums;
 * - a track per thread: the NVTX ranges as slices (the replayer's,
 *   replayer.h, as export_chrome.c's), the all-gather rate
 *   limiter's waits as slices, and as instants the collectives (the trace
 *   records when one was enqueued, not how long it ran), marks, snapshots
 *   and out-of-memory events;
 * - a heap profile (ProfilePacket, heapprofd's format), which the UI shows
 *   as a flame graph: per stack, the bytes live at each device's peak of
 *   allocated bytes, the moment and the weights of `top` and --folded
 *   (sites.c), frames rendered as they render them (render.c, symbols.c),
 *   Python frames merged in as export_memviz.c merges them, each native
 *   frame in a mapping of its module with the module's build id.
 *
 * Times are the wall clock: each header's realtime base plus the record's
 * time, which puts the ranks of several hosts on one clock as --chrome and
 * `timeline` do. A clock snapshot first says that every clock Perfetto
 * reads here (boot time for packets, the coarse monotonic clock for heap
 * dumps) is that one.
 *
 * Each trace is read twice, its peaks and then its events, and packets are
 * written as they are made: memory follows the live blocks, the streams,
 * threads and stacks, never the trace's length. Field numbers are those of
 * Perfetto's protos/perfetto/trace (trace_packet.proto, clock_snapshot.proto,
 * track_event, interned_data and profiling). */
#include "export.h"

#include "exit_status.h"
#include "pair_ids.h"
#include "progress.h"
#include "protobuf.h"
#include "render.h"
#include "replayer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEVICES   FS_SITES_MAX_DEVICES
#define PROFILE_CHUNK (1u << 20) /* a heap profile's bytes per packet, about */
#define SPARE_PID     (1u << 22) /* above Linux's largest pid: stand-ins for pids seen twice */

/* ---- Perfetto's field numbers ---------------------------------------------------- */

enum { TRACE_PACKET = 1 }; /* Trace */

/* TracePacket, and its sequence_flags */
enum {
    PACKET_CLOCK_SNAPSHOT = 6,
    PACKET_TIMESTAMP = 8,
    PACKET_SEQUENCE_ID = 10, /* trusted_packet_sequence_id */
    PACKET_TRACK_EVENT = 11,
    PACKET_INTERNED_DATA = 12,
    PACKET_SEQUENCE_FLAGS = 13,
    PACKET_PROFILE = 37,
    PACKET_TRACK_DESCRIPTOR = 60,
};
enum { SEQ_INCREMENTAL_STATE_CLEARED = 1, SEQ_NEEDS_INCREMENTAL_STATE = 2 };

/* ClockSnapshot, its Clock, BuiltinClock */
enum { SNAPSHOT_CLOCKS = 1, CLOCK_ID = 1, CLOCK_TIMESTAMP = 2 };
enum { CLOCK_REALTIME = 1, CLOCK_MONOTONIC = 3, CLOCK_MONOTONIC_COARSE = 4, CLOCK_BOOTTIME = 6 };

/* TrackDescriptor, ProcessDescriptor, CounterDescriptor and its unit */
enum { TRACK_UUID = 1, TRACK_NAME = 2, TRACK_PROCESS = 3, TRACK_PARENT = 5, TRACK_COUNTER = 8 };
enum { PROCESS_PID = 1, PROCESS_NAME = 6 };
enum { COUNTER_UNIT = 3, COUNTER_AXIS = 7, UNIT_SIZE_BYTES = 3 };

/* TrackEvent, its type, DebugAnnotation */
enum {
    EVENT_CATEGORY_IIDS = 3,
    EVENT_ANNOTATIONS = 4,
    EVENT_TYPE = 9,
    EVENT_NAME_IID = 10,
    EVENT_TRACK = 11,
    EVENT_COUNTER_VALUE = 30,
};
enum { SLICE_BEGIN = 1, SLICE_END = 2, INSTANT = 3, COUNTER = 4 };
enum { DEBUG_NAME_IID = 1, DEBUG_UINT = 3, DEBUG_INT = 4, DEBUG_STRING = 6, DEBUG_POINTER = 7 };

/* InternedData; its EventCategory, EventName and DebugAnnotationName alike */
enum { INTERNED_CATEGORIES = 1, INTERNED_EVENT_NAMES = 2, INTERNED_ARG_NAMES = 3 };
enum { INTERNED_IID = 1, INTERNED_NAME = 2 };

/* ProfilePacket, its ProcessHeapSamples and HeapSample */
enum {
    PROFILE_STRINGS = 1,
    PROFILE_FRAMES = 2,
    PROFILE_CALLSTACKS = 3,
    PROFILE_MAPPINGS = 4,
    PROFILE_DUMPS = 5,
    PROFILE_CONTINUED = 6,
    PROFILE_INDEX = 7,
};
enum {
    DUMP_PID = 1,
    DUMP_SAMPLES = 2,
    DUMP_TIMESTAMP = 9,
    DUMP_HEAP_NAME = 11,
    DUMP_SAMPLING_INTERVAL = 12,
    DUMP_ORIG_SAMPLING_INTERVAL = 13,
};
enum { SAMPLE_CALLSTACK = 1, SAMPLE_SELF_MAX = 8, SAMPLE_SELF_MAX_COUNT = 9 };

/* profile_common.proto: InternedString, Mapping, Frame, Callstack */
enum { STRING_IID = 1, STRING_STR = 2 };
enum {
    MAPPING_IID = 1,
    MAPPING_BUILD_ID = 2,
    MAPPING_START = 4,
    MAPPING_END = 5,
    MAPPING_PATH = 7,
};
enum { FRAME_IID = 1, FRAME_FUNCTION = 2, FRAME_MAPPING = 3, FRAME_REL_PC = 4 };
enum { CALLSTACK_IID = 1, CALLSTACK_FRAMES = 2 };

/* ---- the names a sequence interns ------------------------------------------------ */

/* Event names: this export's own, then the collectives', then the trace's
 * strings (range, mark names) at NAME_STRINGS + their id, each interned
 * with the first event that uses it. */
enum { NAME_WAIT = 1, NAME_OOM, NAME_MARK, NAME_SNAPSHOT, NAME_COLLECTIVE, NAME_OPS };
#define NAME_STRINGS (NAME_OPS + FS_COLL_OTHER)
static const char *const own_names[NAME_OPS] = {
    NULL, "rate-limiter wait", "out of memory", "mark", "snapshot", "collective",
};

enum { CAT_NVTX = 1, CAT_FSDPSHIM, CAT_COLLECTIVE, CAT_END };
static const char *const categories[CAT_END] = {NULL, "nvtx", "fsdpshim", "collective"};

enum {
    ARG_DEVICE = 1,
    ARG_BYTES,
    ARG_STREAM,
    ARG_COMMUNICATOR,
    ARG_GATHERS,
    ARG_BYTES_IN_FLIGHT,
    ARG_REQUESTED,
    ARG_ALLOCATED,
    ARG_RESERVED,
    ARG_LARGEST_FREE,
    ARG_LABEL,
    ARG_END
};
static const char *const arg_names[ARG_END] = {
    NULL,
    "device",
    "bytes",
    "stream",
    "communicator",
    "gathers_in_flight",
    "bytes_in_flight",
    "requested",
    "allocated",
    "reserved",
    "largest_free_block",
    "label",
};

/* ---- the state of one trace ------------------------------------------------------ */

typedef struct thread {
    uint32_t tid;
    uint32_t name;  /* its thread record's string id; 0: none seen */
    bool described; /* its track is */
    bool waiting;   /* a rate-limiter wait's slice is open */
} thread;

typedef struct stream {
    int device;
    uint64_t handle;
    uint64_t bytes[2]; /* allocated (live blocks), reserved (segments) */
    bool described;
} stream;

/* What a live block was allocated with: its site in fs_live */
typedef struct block_kind {
    uint32_t stack, pystack;
    uint32_t stream; /* its stream's id */
} block_kind;

/* Bytes live at the peaks with one (native, Python) stack */
typedef struct sample {
    uint32_t stack, pystack;
    uint64_t bytes, count;
} sample;

typedef struct device {
    bool used;         /* it had memory events */
    bool described;    /* its counter tracks are */
    bool written;      /* its counters have values */
    uint64_t bytes[2]; /* allocated, reserved: as last written */
    /* the first pass: its highest allocated total at an allocation, when,
     * and the allocation's ordinal among the allocations and frees */
    uint64_t peak, peak_ns, peak_at;
} device;

/* A native frame's source frames: consecutive frame ids */
typedef struct pc_frames {
    uint32_t first, n;
} pc_frames;

/* Mappings for frames in no module: native ones outside every module the
 * trace knows (and allocations without a stack), Python's */
enum standin { STANDIN_UNKNOWN = 1, STANDIN_PYTHON };
static const char *const standin_names[] = {NULL, "[unknown]", "[python]"};

enum track_kind {
    TRACK_OF_PROCESS,
    TRACK_OF_DEVICE,
    TRACK_OF_RANK,
    TRACK_OF_STREAM,
    TRACK_OF_THREAD
};
enum { ALLOCATED, RESERVED };
static const char *const figure_names[2] = {"allocated", "reserved"};

typedef struct perfetto {
    fs_symbols *sym;
    FILE *f;
    fs_pb pkt;        /* the packet being written */
    bool clock;       /* the clock snapshot is written */
    uint32_t *pids;   /* given to the traces so far */
    uint64_t events;  /* over all traces */
    char text[16384]; /* a rendered frame */

    /* the trace being written */
    int index;     /* its place among the traces: its tracks' uuids and sequences */
    uint32_t pid;  /* its process in the output */
    uint64_t base; /* its wall-clock ns at its time 0 */
    uint64_t last_ns;
    int ndevices;
    device dev[MAX_DEVICES];
    bool rank_described;
    uint64_t rank_bytes[2]; /* over its devices, as last written */
    uint64_t ordinal;       /* allocations and frees so far */
    uint8_t *interned;      /* per string id: interned as an event name */
    size_t capinterned;
    fs_pair_ids thread_ids;
    thread *threads;
    size_t capthreads;
    fs_pair_ids stream_ids;
    stream *streams;
    size_t capstreams;
    fs_pair_ids kind_ids;
    block_kind *kinds;
    size_t capkinds;
    fs_replayer *rp; /* live blocks (site: a block_kind id), annotation ranges */
    fs_pair_ids sample_ids;
    sample *samples;
    size_t capsamples;

    /* its heap profile */
    fs_pb dump; /* the samples of the packet being written */
    uint64_t profile_index, profile_ns;
    uint32_t nstrings, nframes;
    fs_pair_ids mapping_ids; /* a module's address (or 0 and a stand-in's number) */
    fs_pair_ids pc_ids;
    pc_frames *pcs;
    size_t cappcs;
    fs_pair_ids pyframe_ids; /* (file << 32 | function, line) */
    uint32_t *pyframes;
    size_t cappyframes;
    uint32_t no_stack; /* the frame of an allocation without a stack; 0: none yet */
    uint64_t *stack;   /* a callstack's frame ids, innermost first */
    size_t nstack, capstack;
} perfetto;

/* Tracks' uuids: unique over the file, with the trace's place above */
static uint64_t track(const perfetto *p, enum track_kind k, uint64_t n)
{
    return (uint64_t)(p->index + 1) << 40 | (uint64_t)k << 32 | n;
}

/* The trace's packet sequences: its events, its heap profile (1 is the clock's) */
static uint32_t events_sequence(const perfetto *p)
{
    return 2 * (uint32_t)p->index + 2;
}

/* ---- packets --------------------------------------------------------------------- */

static void packet_begin(perfetto *p, uint32_t sequence)
{
    fs_pb_clear(&p->pkt);
    fs_pb_begin(&p->pkt, TRACE_PACKET);
    fs_pb_uint(&p->pkt, PACKET_SEQUENCE_ID, sequence);
}

static void packet_end(perfetto *p)
{
    fs_pb_end(&p->pkt);
    fwrite(p->pkt.data, 1, p->pkt.len, p->f);
}

/* s as a string field, each byte that is not UTF-8 made '?': protobuf
 * strings are UTF-8, and a trace's strings are whatever the program gave */
static void text_field(fs_pb *b, uint32_t field, const char *s)
{
    size_t n = strlen(s);
    fs_pb_bytes(b, field, s, n);
    unsigned char *at = b->data + b->len - n;
    for (size_t i = 0; i < n;) {
        size_t k = fs_utf8_len(at + i, n - i);
        if (!k) at[i] = '?';
        i += k ? k : 1;
    }
}

/* Every clock Perfetto reads here is the wall clock (see the top) */
static void clock_snapshot(perfetto *p, uint64_t now)
{
    static const int clocks[] = {CLOCK_BOOTTIME, CLOCK_REALTIME, CLOCK_MONOTONIC,
                                 CLOCK_MONOTONIC_COARSE};
    packet_begin(p, 1);
    fs_pb_begin(&p->pkt, PACKET_CLOCK_SNAPSHOT);
    for (size_t i = 0; i < sizeof clocks / sizeof clocks[0]; i++) {
        fs_pb_begin(&p->pkt, SNAPSHOT_CLOCKS);
        fs_pb_uint(&p->pkt, CLOCK_ID, (uint64_t)clocks[i]);
        fs_pb_uint(&p->pkt, CLOCK_TIMESTAMP, now);
        fs_pb_end(&p->pkt);
    }
    fs_pb_end(&p->pkt);
    packet_end(p);
}

static void interned_name(fs_pb *b, uint32_t table, uint64_t iid, const char *name)
{
    fs_pb_begin(b, table);
    fs_pb_uint(b, INTERNED_IID, iid);
    text_field(b, INTERNED_NAME, name);
    fs_pb_end(b);
}

/* The trace's first packet: its sequence starts afresh, with this export's
 * own names interned, and describes its process */
static void describe_process(perfetto *p, const fs_reader *t, int rank)
{
    const fs_fmt_header *h = fs_reader_header(t);
    char name[160];

    if (rank >= 0)
        snprintf(name, sizeof name, "rank %d (pid %u on %s)", rank, h->pid, h->host);
    else
        snprintf(name, sizeof name, "pid %u on %s", h->pid, h->host);
    packet_begin(p, events_sequence(p));
    fs_pb_uint(&p->pkt, PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    fs_pb_begin(&p->pkt, PACKET_INTERNED_DATA);
    for (int i = 1; i < CAT_END; i++)
        interned_name(&p->pkt, INTERNED_CATEGORIES, (uint64_t)i, categories[i]);
    for (int i = 1; i < NAME_OPS; i++)
        interned_name(&p->pkt, INTERNED_EVENT_NAMES, (uint64_t)i, own_names[i]);
    for (unsigned op = 1; op <= FS_COLL_OTHER; op++)
        interned_name(&p->pkt, INTERNED_EVENT_NAMES, NAME_OPS + op - 1, fs_fmt_coll_name(op));
    for (int i = 1; i < ARG_END; i++)
        interned_name(&p->pkt, INTERNED_ARG_NAMES, (uint64_t)i, arg_names[i]);
    fs_pb_end(&p->pkt);
    fs_pb_begin(&p->pkt, PACKET_TRACK_DESCRIPTOR);
    fs_pb_uint(&p->pkt, TRACK_UUID, track(p, TRACK_OF_PROCESS, 0));
    fs_pb_begin(&p->pkt, TRACK_PROCESS);
    fs_pb_uint(&p->pkt, PROCESS_PID, p->pid);
    text_field(&p->pkt, PROCESS_NAME, name);
    fs_pb_end(&p->pkt);
    fs_pb_end(&p->pkt);
    packet_end(p);
}

/* A counter track of bytes in the trace's process; tracks with the same
 * axis share their scale */
static void describe_counter(perfetto *p, uint64_t uuid, const char *name, const char *axis)
{
    packet_begin(p, events_sequence(p));
    fs_pb_begin(&p->pkt, PACKET_TRACK_DESCRIPTOR);
    fs_pb_uint(&p->pkt, TRACK_UUID, uuid);
    fs_pb_uint(&p->pkt, TRACK_PARENT, track(p, TRACK_OF_PROCESS, 0));
    text_field(&p->pkt, TRACK_NAME, name);
    fs_pb_begin(&p->pkt, TRACK_COUNTER);
    fs_pb_uint(&p->pkt, COUNTER_UNIT, UNIT_SIZE_BYTES);
    text_field(&p->pkt, COUNTER_AXIS, axis);
    fs_pb_end(&p->pkt);
    fs_pb_end(&p->pkt);
    packet_end(p);
}

static void counter(perfetto *p, uint64_t uuid, uint64_t time_ns, uint64_t value)
{
    packet_begin(p, events_sequence(p));
    fs_pb_uint(&p->pkt, PACKET_TIMESTAMP, p->base + time_ns);
    fs_pb_begin(&p->pkt, PACKET_TRACK_EVENT);
    fs_pb_uint(&p->pkt, EVENT_TYPE, COUNTER);
    fs_pb_uint(&p->pkt, EVENT_TRACK, uuid);
    fs_pb_int(&p->pkt, EVENT_COUNTER_VALUE, (int64_t)value);
    fs_pb_end(&p->pkt);
    packet_end(p);
}

/* ---- threads: slices and instants ------------------------------------------------ */

static uint32_t thread_id(perfetto *p, uint32_t tid)
{
    bool added;
    uint32_t id = fs_pair_id(&p->thread_ids, tid, 0, &added);
    if (added) {
        p->threads = fs_grow(p->threads, &p->capthreads, id, sizeof *p->threads);
        p->threads[id - 1].tid = tid;
    }
    return id;
}

/* A thread's track: "NAME TID", in its process */
static void describe_thread(perfetto *p, const fs_reader *t, uint32_t id)
{
    thread *th = &p->threads[id - 1];
    char name[4200];

    snprintf(name, sizeof name, "%s %" PRIu32, th->name ? fs_render_str(t, th->name) : "thread",
             th->tid);
    packet_begin(p, events_sequence(p));
    fs_pb_begin(&p->pkt, PACKET_TRACK_DESCRIPTOR);
    fs_pb_uint(&p->pkt, TRACK_UUID, track(p, TRACK_OF_THREAD, id));
    fs_pb_uint(&p->pkt, TRACK_PARENT, track(p, TRACK_OF_PROCESS, 0));
    text_field(&p->pkt, TRACK_NAME, name);
    fs_pb_end(&p->pkt);
    packet_end(p);
    th->described = true;
}

/* Opens a track event of `type` on thread id's track, named by name (an
 * event name's iid; 0 for a slice's end), in category cat (0: none); a
 * trace string's name goes into the sequence's interned data with the
 * first event that uses it. The caller adds arguments and ends it. */
static void event_begin(perfetto *p, const fs_reader *t, uint32_t id, int type, uint64_t time_ns,
                        uint64_t name, int cat)
{
    if (!p->threads[id - 1].described) describe_thread(p, t, id);
    packet_begin(p, events_sequence(p));
    fs_pb_uint(&p->pkt, PACKET_TIMESTAMP, p->base + time_ns);
    fs_pb_uint(&p->pkt, PACKET_SEQUENCE_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
    if (name >= NAME_STRINGS) {
        uint64_t s = name - NAME_STRINGS;
        p->interned = fs_grow(p->interned, &p->capinterned, (size_t)s + 1, 1);
        if (!p->interned[s]) {
            p->interned[s] = 1;
            fs_pb_begin(&p->pkt, PACKET_INTERNED_DATA);
            interned_name(&p->pkt, INTERNED_EVENT_NAMES, name, fs_render_str(t, (uint32_t)s));
            fs_pb_end(&p->pkt);
        }
    }
    fs_pb_begin(&p->pkt, PACKET_TRACK_EVENT);
    fs_pb_uint(&p->pkt, EVENT_TYPE, (uint64_t)type);
    fs_pb_uint(&p->pkt, EVENT_TRACK, track(p, TRACK_OF_THREAD, id));
    if (name) fs_pb_uint(&p->pkt, EVENT_NAME_IID, name);
    if (cat) fs_pb_uint(&p->pkt, EVENT_CATEGORY_IIDS, (uint64_t)cat);
}

static void event_end(perfetto *p)
{
    fs_pb_end(&p->pkt);
    packet_end(p);
}

/* An argument of the open event, its value a varint in field `value` (a
 * DEBUG_UINT count, a DEBUG_INT, a DEBUG_POINTER shown in hex), or a string */
static void arg(perfetto *p, int name, uint32_t value, uint64_t v)
{
    fs_pb_begin(&p->pkt, EVENT_ANNOTATIONS);
    fs_pb_uint(&p->pkt, DEBUG_NAME_IID, (uint64_t)name);
    fs_pb_uint(&p->pkt, value, v);
    fs_pb_end(&p->pkt);
}

static void arg_text(perfetto *p, int name, const char *s)
{
    fs_pb_begin(&p->pkt, EVENT_ANNOTATIONS);
    fs_pb_uint(&p->pkt, DEBUG_NAME_IID, (uint64_t)name);
    text_field(&p->pkt, DEBUG_STRING, s);
    fs_pb_end(&p->pkt);
}

/* The annotation ranges (replayer.h) as slices on their threads' tracks */
static void range_opened(void *ctx, fs_reader *t, const fs_replayer_range *r)
{
    perfetto *p = ctx;
    uint32_t parent, domain, name;
    fs_reader_annot(t, r->node, &parent, &domain, &name);
    event_begin(p, t, thread_id(p, r->tid), SLICE_BEGIN, r->start_ns, NAME_STRINGS + name,
                CAT_NVTX);
    event_end(p);
}

static void range_closed(void *ctx, fs_reader *t, const fs_replayer_range *r, uint64_t end_ns)
{
    perfetto *p = ctx;
    event_begin(p, t, thread_id(p, r->tid), SLICE_END, end_ns, 0, 0);
    event_end(p);
}

/* A rate-limiter wait is a slice from its start to its end on its thread.
 * Nothing else happens on a thread while it waits; should the trace show
 * something (the end was lost), the slice ends there, so that slices nest. */
static void wait_end(perfetto *p, const fs_reader *t, uint32_t id, uint64_t time_ns)
{
    if (!p->threads[id - 1].waiting) return; /* it began before the trace */
    event_begin(p, t, id, SLICE_END, time_ns, 0, 0);
    event_end(p);
    p->threads[id - 1].waiting = false;
}

static void thread_event(perfetto *p, fs_reader *t, const fs_fmt_record *r, uint32_t id)
{
    const fs_fmt_event *ev = &r->ev;

    switch (r->kind) {
    case FS_REC_OOM:
        event_begin(p, t, id, INSTANT, ev->time_ns, NAME_OOM, CAT_FSDPSHIM);
        arg(p, ARG_DEVICE, DEBUG_INT, (uint64_t)(int64_t)ev->device);
        arg(p, ARG_REQUESTED, DEBUG_UINT, ev->size);
        arg(p, ARG_ALLOCATED, DEBUG_UINT, ev->allocated);
        arg(p, ARG_RESERVED, DEBUG_UINT, ev->reserved);
        arg(p, ARG_LARGEST_FREE, DEBUG_UINT, ev->aux);
        event_end(p);
        break;
    case FS_REC_COLLECTIVE:
        event_begin(p, t, id, INSTANT, ev->time_ns,
                    ev->aux >= 1 && ev->aux <= FS_COLL_OTHER ? NAME_OPS + ev->aux - 1
                                                             : NAME_COLLECTIVE,
                    CAT_COLLECTIVE);
        arg(p, ARG_DEVICE, DEBUG_INT, (uint64_t)(int64_t)ev->device);
        arg(p, ARG_BYTES, DEBUG_UINT, ev->size);
        arg(p, ARG_STREAM, DEBUG_POINTER, ev->stream);
        arg(p, ARG_COMMUNICATOR, DEBUG_POINTER, ev->aux2);
        event_end(p);
        break;
    case FS_REC_RL_WAIT_START:
        event_begin(p, t, id, SLICE_BEGIN, ev->time_ns, NAME_WAIT, CAT_FSDPSHIM);
        arg(p, ARG_DEVICE, DEBUG_INT, (uint64_t)(int64_t)ev->device);
        arg(p, ARG_GATHERS, DEBUG_UINT, ev->aux);
        arg(p, ARG_BYTES_IN_FLIGHT, DEBUG_UINT, ev->aux2);
        event_end(p);
        p->threads[id - 1].waiting = true;
        break;
    case FS_REC_RL_WAIT_END:
        wait_end(p, t, id, ev->time_ns);
        break;
    case FS_REC_ANNOT_MARK:
        event_begin(p, t, id, INSTANT, ev->time_ns, ev->name ? NAME_STRINGS + ev->name : NAME_MARK,
                    CAT_NVTX);
        event_end(p);
        break;
    case FS_REC_SNAPSHOT:
        event_begin(p, t, id, INSTANT, ev->time_ns, NAME_SNAPSHOT, CAT_FSDPSHIM);
        if (ev->name) arg_text(p, ARG_LABEL, fs_render_str(t, ev->name));
        event_end(p);
        break;
    }
}

/* ---- memory: counters, live blocks, the peaks ------------------------------------ */

static bool device_ok(int d)
{
    return d >= 0 && d < MAX_DEVICES;
}

static uint32_t stream_id(perfetto *p, int device, uint64_t handle)
{
    bool added;
    uint32_t id = fs_pair_id(&p->stream_ids, (uint64_t)device, handle, &added);
    if (added) {
        p->streams = fs_grow(p->streams, &p->capstreams, id, sizeof *p->streams);
        p->streams[id - 1].device = device;
        p->streams[id - 1].handle = handle;
    }
    return id;
}

/* Stream id's figure (ALLOCATED, RESERVED) moved by delta bytes; never
 * below 0, for memory the trace saw given back but never taken. A stream's
 * tracks are described when it is first used, the other figure at 0. */
static void stream_add(perfetto *p, uint32_t id, int figure, int64_t delta, uint64_t time_ns)
{
    stream *s = &p->streams[id - 1];
    uint64_t *v = &s->bytes[figure];
    char name[96], axis[32];

    if (!s->described) {
        snprintf(axis, sizeof axis, "device %d streams", s->device);
        for (int k = ALLOCATED; k <= RESERVED; k++) {
            snprintf(name, sizeof name, "device %d stream 0x%" PRIx64 " %s", s->device, s->handle,
                     figure_names[k]);
            describe_counter(p, track(p, TRACK_OF_STREAM, 2 * (uint64_t)id + (uint64_t)k), name,
                             axis);
        }
        s->described = true;
        counter(p, track(p, TRACK_OF_STREAM, 2 * (uint64_t)id + (uint64_t)!figure), time_ns, 0);
    }
    *v = delta < 0 && (uint64_t)-delta > *v ? 0 : *v + (uint64_t)delta;
    counter(p, track(p, TRACK_OF_STREAM, 2 * (uint64_t)id + (uint64_t)figure), time_ns, *v);
}

/* The device's totals, as the event carries them, when they changed; and
 * the rank's, over its devices, when it has several */
static void device_counters(perfetto *p, const fs_fmt_event *ev)
{
    device *d = &p->dev[ev->device];
    uint64_t now[2] = {ev->allocated, ev->reserved};
    char name[64], axis[32];

    if (!d->described) {
        snprintf(axis, sizeof axis, "device %d", ev->device);
        for (int k = ALLOCATED; k <= RESERVED; k++) {
            snprintf(name, sizeof name, "device %d %s", ev->device, figure_names[k]);
            describe_counter(p, track(p, TRACK_OF_DEVICE, 2 * (uint64_t)ev->device + (uint64_t)k),
                             name, axis);
        }
        d->described = true;
    }
    if (p->ndevices > 1 && !p->rank_described) {
        for (int k = ALLOCATED; k <= RESERVED; k++) {
            snprintf(name, sizeof name, "all devices %s", figure_names[k]);
            describe_counter(p, track(p, TRACK_OF_RANK, (uint64_t)k), name, "all devices");
        }
        p->rank_described = true;
    }
    for (int k = ALLOCATED; k <= RESERVED; k++) {
        if (d->written && d->bytes[k] == now[k]) continue;
        counter(p, track(p, TRACK_OF_DEVICE, 2 * (uint64_t)ev->device + (uint64_t)k), ev->time_ns,
                now[k]);
        if (p->ndevices > 1) {
            p->rank_bytes[k] += now[k] - d->bytes[k]; /* modulo 2^64: the new sum */
            counter(p, track(p, TRACK_OF_RANK, (uint64_t)k), ev->time_ns, p->rank_bytes[k]);
        }
        d->bytes[k] = now[k];
    }
    d->written = true;
}

/* The kind id of a block allocated by ev */
static uint32_t kind_id(perfetto *p, const fs_fmt_event *ev, uint32_t stream)
{
    bool added;
    uint32_t id = fs_pair_id(&p->kind_ids, (uint64_t)ev->stack << 32 | ev->pystack, stream, &added);
    if (added) {
        p->kinds = fs_grow(p->kinds, &p->capkinds, id, sizeof *p->kinds);
        p->kinds[id - 1] = (block_kind){ev->stack, ev->pystack, stream};
    }
    return id;
}

/* Device dn at its peak: each of its live blocks counts at its stack */
static void take_peak(perfetto *p, int dn)
{
    fs_live_block lb;
    for (size_t pos = 0; fs_live_next(fs_replayer_live(p->rp), &pos, &lb);) {
        const fs_live_block *l = &lb;
        if (l->device != dn) continue;
        const block_kind *k = &p->kinds[l->site - 1];
        bool added;
        uint32_t id = fs_pair_id(&p->sample_ids, (uint64_t)k->stack << 32 | k->pystack, 0, &added);
        p->samples = fs_grow(p->samples, &p->capsamples, id, sizeof *p->samples);
        sample *s = &p->samples[id - 1];
        s->stack = k->stack;
        s->pystack = k->pystack;
        s->bytes += l->size;
        s->count++;
    }
}

/* An allocation's block (replayer.h) is numbered by its kind */
static uint32_t block_site(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    perfetto *p = ctx;
    (void)t, (void)tid;
    return kind_id(p, &r->ev, stream_id(p, r->ev.device, r->ev.stream));
}

/* A block enters the live table: its stream's allocated bytes go up; the
 * device's peak is taken after its allocation */
static void block_added(void *ctx, const fs_live_block *b, const fs_fmt_record *r)
{
    perfetto *p = ctx;
    stream_add(p, p->kinds[b->site - 1].stream, ALLOCATED, (int64_t)b->size, r->ev.time_ns);
    if (p->ordinal == p->dev[b->device].peak_at) take_peak(p, b->device);
}

/* A block leaves the live table (freed, or its free lost and its address
 * allocated again): its stream's allocated bytes go down */
static void block_gone(void *ctx, const fs_live_block *b, const fs_fmt_record *r)
{
    perfetto *p = ctx;
    stream_add(p, p->kinds[b->site - 1].stream, ALLOCATED, -(int64_t)b->size, r->ev.time_ns);
}

/* The memory event after the replayer saw it: segments, and the counters */
static void memory_event(perfetto *p, const fs_fmt_record *r)
{
    const fs_fmt_event *ev = &r->ev;
    int dn = ev->device;

    if (!device_ok(dn)) return;
    switch (r->kind) {
    case FS_REC_SEGMENT_ALLOC:
    case FS_REC_SEGMENT_MAP:
        stream_add(p, stream_id(p, dn, ev->stream), RESERVED, (int64_t)ev->size, ev->time_ns);
        break;
    case FS_REC_SEGMENT_FREE:
    case FS_REC_SEGMENT_UNMAP:
        stream_add(p, stream_id(p, dn, ev->stream), RESERVED, -(int64_t)ev->size, ev->time_ns);
        break;
    }
    device_counters(p, ev);
}

static bool is_memory(unsigned kind)
{
    return (kind >= FS_REC_ALLOC && kind <= FS_REC_SEGMENT_UNMAP) || kind == FS_REC_OOM;
}

/* The first pass: each device's peak, as sites.c finds it (the first
 * allocation after which its allocated total was highest, counted among
 * the allocations and frees), and the events */
static int find_peaks(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    perfetto *p = ctx;
    const fs_fmt_event *ev = &r->ev;
    (void)t, (void)tid;

    if (r->kind < FS_REC_ALLOC || r->kind > FS_REC_EVENT_LAST) return 0;
    p->events++;
    if (!is_memory(r->kind) || !device_ok(ev->device)) return 0;
    device *d = &p->dev[ev->device];
    if (!d->used) p->ndevices++;
    d->used = true;
    if (r->kind != FS_REC_ALLOC && r->kind != FS_REC_FREE_REQUESTED) return 0;
    p->ordinal++;
    if (r->kind == FS_REC_ALLOC && ev->allocated > d->peak) {
        d->peak = ev->allocated;
        d->peak_ns = ev->time_ns;
        d->peak_at = p->ordinal;
    }
    return 0;
}

static int write_event(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    perfetto *p = ctx;
    const fs_fmt_event *ev = &r->ev;

    if (r->kind == FS_REC_THREAD) {
        uint32_t named = thread_id(p, r->u.thread.tid); /* before p->threads moves */
        p->threads[named - 1].name = r->u.thread.name;
        return 0;
    }
    if (r->kind < FS_REC_ALLOC || r->kind > FS_REC_EVENT_LAST) return 0;
    uint32_t id = thread_id(p, tid);
    p->last_ns = ev->time_ns;
    if (r->kind != FS_REC_RL_WAIT_END) wait_end(p, t, id, ev->time_ns);
    /* allocations and frees are counted as the first pass counted them */
    if ((r->kind == FS_REC_ALLOC || r->kind == FS_REC_FREE_REQUESTED) && device_ok(ev->device))
        p->ordinal++;
    fs_replayer_see(p->rp, t, r, tid); /* ranges, then blocks */
    if (is_memory(r->kind)) memory_event(p, r);
    thread_event(p, t, r, id);
    return 0;
}

/* ---- the heap profile ------------------------------------------------------------ */

static uint32_t profile_string(perfetto *p, const void *s, size_t n, bool text)
{
    fs_pb_begin(&p->pkt, PROFILE_STRINGS);
    fs_pb_uint(&p->pkt, STRING_IID, ++p->nstrings);
    if (text)
        text_field(&p->pkt, STRING_STR, s);
    else
        fs_pb_bytes(&p->pkt, STRING_STR, s, n);
    fs_pb_end(&p->pkt);
    return p->nstrings;
}

/* The mapping of module mod, or when mod is NULL of a stand-in (Perfetto
 * places every frame in a mapping): its iid, written the first time */
static uint32_t mapping(perfetto *p, const fs_reader *t, const fs_reader_module *mod,
                        enum standin what)
{
    bool added;
    uint32_t id = fs_pair_id(&p->mapping_ids, (uint64_t)(uintptr_t)mod, mod ? 0 : what, &added);
    if (!added) return id;
    uint32_t build_id =
        mod && mod->build_id_len ? profile_string(p, mod->build_id, mod->build_id_len, false) : 0;
    uint32_t path =
        profile_string(p, mod ? fs_render_str(t, mod->path) : standin_names[what], 0, true);
    fs_pb_begin(&p->pkt, PROFILE_MAPPINGS);
    fs_pb_uint(&p->pkt, MAPPING_IID, id);
    fs_pb_uint(&p->pkt, MAPPING_BUILD_ID, build_id);
    if (mod) {
        fs_pb_uint(&p->pkt, MAPPING_START, mod->base);
        fs_pb_uint(&p->pkt, MAPPING_END, mod->base + mod->size);
    }
    fs_pb_uint(&p->pkt, MAPPING_PATH, path); /* the whole path as one part, as Chrome writes it */
    fs_pb_end(&p->pkt);
    return id;
}

static uint32_t frame(perfetto *p, const char *name, uint32_t mapping_id, uint64_t rel_pc)
{
    uint32_t fn = profile_string(p, name, 0, true);
    fs_pb_begin(&p->pkt, PROFILE_FRAMES);
    fs_pb_uint(&p->pkt, FRAME_IID, ++p->nframes);
    fs_pb_uint(&p->pkt, FRAME_FUNCTION, fn);
    fs_pb_uint(&p->pkt, FRAME_MAPPING, mapping_id);
    fs_pb_uint(&p->pkt, FRAME_REL_PC, rel_pc);
    fs_pb_end(&p->pkt);
    return p->nframes;
}

static void push_frame(perfetto *p, uint64_t id)
{
    p->stack = fs_grow(p->stack, &p->capstack, p->nstack + 1, sizeof *p->stack);
    p->stack[p->nstack++] = id;
}

/* Native frame pc's source frames, innermost first, as render.c renders
 * them (one line each: an address in inlined code stands for several);
 * each pc's written once */
static void native_frames(perfetto *p, const fs_reader *t, uint64_t pc)
{
    bool added;
    uint32_t id = fs_pair_id(&p->pc_ids, pc, 0, &added);
    p->pcs = fs_grow(p->pcs, &p->cappcs, id, sizeof *p->pcs);
    pc_frames *pf = &p->pcs[id - 1];
    if (added) {
        uint64_t off;
        const fs_reader_module *mod = fs_reader_module_of(t, pc, &off);
        uint32_t m = mapping(p, t, mod, STANDIN_UNKNOWN);
        fs_render_frame_sym(t, p->sym, pc, p->text, sizeof p->text);
        pf->first = p->nframes + 1;
        for (char *line = p->text, *end; line; line = end ? end + 1 : NULL) {
            end = strchr(line, '\n');
            if (end) *end = '\0';
            frame(p, line, m, mod ? off : pc);
            pf->n++;
        }
    }
    for (uint32_t i = 0; i < pf->n; i++)
        push_frame(p, pf->first + i);
}

static void python_frame(perfetto *p, const fs_reader *t, const fs_fmt_pyframe *py)
{
    bool added;
    uint32_t id =
        fs_pair_id(&p->pyframe_ids, (uint64_t)py->file << 32 | py->function, py->line, &added);
    p->pyframes = fs_grow(p->pyframes, &p->cappyframes, id, sizeof *p->pyframes);
    if (added) {
        fs_render_pyframe(t, py, p->text, sizeof p->text);
        p->pyframes[id - 1] = frame(p, p->text, mapping(p, t, NULL, STANDIN_PYTHON), 0);
    }
    push_frame(p, p->pyframes[id - 1]);
}

/* An allocation's frames into p->stack, innermost first, Python and native
 * in one list as export_memviz.c gives them: the native frames up to the
 * interpreter, the Python frames it was running, then the interpreter's
 * own native frames outwards */
static void frames_of(perfetto *p, const fs_reader *t, uint32_t stack, uint32_t pystack)
{
    const uint64_t *pcs;
    const fs_fmt_pyframe *py;
    uint32_t npc = stack ? fs_reader_stack(t, stack, &pcs) : 0;
    uint32_t npy = pystack ? fs_reader_pystack(t, pystack, &py) : 0;
    uint32_t i = 0;

    p->nstack = 0;
    if (!npc && !npy) {
        if (!p->no_stack)
            p->no_stack = frame(p, "(no stack)", mapping(p, t, NULL, STANDIN_UNKNOWN), 0);
        push_frame(p, p->no_stack);
        return;
    }
    for (uint32_t at = fs_render_python_at(t, pcs, npc); i < at; i++)
        native_frames(p, t, pcs[i]);
    for (uint32_t k = 0; k < npy; k++)
        python_frame(p, t, &py[k]);
    for (; i < npc; i++)
        native_frames(p, t, pcs[i]);
}

static void profile_begin(perfetto *p)
{
    packet_begin(p, events_sequence(p) + 1);
    fs_pb_uint(&p->pkt, PACKET_TIMESTAMP, p->profile_ns);
    if (!p->profile_index)
        fs_pb_uint(&p->pkt, PACKET_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
    fs_pb_begin(&p->pkt, PACKET_PROFILE);
    fs_pb_clear(&p->dump);
}

/* Ends the profile's packet: its samples in a dump of the process (every
 * packet of a profile repeats the dump's header), and whether more follow */
static void profile_end(perfetto *p, bool continued)
{
    fs_pb_begin(&p->pkt, PROFILE_DUMPS);
    fs_pb_uint(&p->pkt, DUMP_PID, p->pid);
    fs_pb_uint(&p->pkt, DUMP_TIMESTAMP, p->profile_ns);
    fs_pb_str(&p->pkt, DUMP_HEAP_NAME, "device memory");
    /* every allocation is in the trace: no sampling (an interval of one
     * byte); the original interval being set tells trace_processor that
     * the counts are exact */
    fs_pb_uint(&p->pkt, DUMP_SAMPLING_INTERVAL, 1);
    fs_pb_uint(&p->pkt, DUMP_ORIG_SAMPLING_INTERVAL, 1);
    fs_pb_append(&p->pkt, &p->dump);
    fs_pb_end(&p->pkt);
    if (continued) fs_pb_uint(&p->pkt, PROFILE_CONTINUED, 1);
    fs_pb_uint(&p->pkt, PROFILE_INDEX, p->profile_index++);
    fs_pb_end(&p->pkt);
    packet_end(p);
}

/* The heap profile of the trace, on a sequence of its own: one dump, at
 * the highest device's peak, of the bytes live at each device's peak per
 * stack (self_max: heapprofd's figure for a dump at the peak), its
 * definitions with it, in packets of about PROFILE_CHUNK bytes */
static void write_profile(perfetto *p, const fs_reader *t)
{
    uint64_t highest = 0;

    for (int dn = 0; dn < MAX_DEVICES; dn++)
        if (p->dev[dn].peak > highest) {
            highest = p->dev[dn].peak;
            p->profile_ns = p->base + p->dev[dn].peak_ns;
        }
    if (!fs_pair_ids_count(&p->sample_ids)) return;
    profile_begin(p);
    for (uint32_t id = 1; id <= fs_pair_ids_count(&p->sample_ids); id++) {
        const sample *s = &p->samples[id - 1];
        frames_of(p, t, s->stack, s->pystack);
        fs_pb_begin(&p->pkt, PROFILE_CALLSTACKS);
        fs_pb_uint(&p->pkt, CALLSTACK_IID, id);
        for (size_t i = p->nstack; i-- > 0;) /* the outermost first */
            fs_pb_uint(&p->pkt, CALLSTACK_FRAMES, p->stack[i]);
        fs_pb_end(&p->pkt);
        fs_pb_begin(&p->dump, DUMP_SAMPLES);
        fs_pb_uint(&p->dump, SAMPLE_CALLSTACK, id);
        fs_pb_uint(&p->dump, SAMPLE_SELF_MAX, s->bytes);
        fs_pb_uint(&p->dump, SAMPLE_SELF_MAX_COUNT, s->count);
        fs_pb_end(&p->dump);
        if (id < fs_pair_ids_count(&p->sample_ids) && p->pkt.len + p->dump.len > PROFILE_CHUNK) {
            profile_end(p, true);
            profile_begin(p);
        }
    }
    profile_end(p, false);
}

/* ---- the traces ------------------------------------------------------------------ */

/* What one trace needed, freed for the next */
static void trace_reset(perfetto *p)
{
    fs_pair_ids_free(&p->thread_ids);
    fs_pair_ids_free(&p->stream_ids);
    fs_pair_ids_free(&p->kind_ids);
    fs_pair_ids_free(&p->sample_ids);
    fs_pair_ids_free(&p->mapping_ids);
    fs_pair_ids_free(&p->pc_ids);
    fs_pair_ids_free(&p->pyframe_ids);
    fs_replayer_free(p->rp);
    p->rp = NULL;
    free(p->threads);
    free(p->streams);
    free(p->kinds);
    free(p->samples);
    free(p->pcs);
    free(p->pyframes);
    free(p->interned);
    p->threads = NULL, p->streams = NULL, p->kinds = NULL, p->samples = NULL;
    p->pcs = NULL, p->pyframes = NULL, p->interned = NULL;
    p->capthreads = p->capstreams = p->capkinds = p->capsamples = 0;
    p->cappcs = p->cappyframes = p->capinterned = 0;
    memset(p->dev, 0, sizeof p->dev);
    p->ndevices = 0;
    p->ordinal = p->last_ns = 0;
    p->rank_described = false;
    p->rank_bytes[ALLOCATED] = p->rank_bytes[RESERVED] = 0;
    p->profile_index = p->profile_ns = 0;
    p->nstrings = p->nframes = p->no_stack = 0;
}

/* The pid trace t's process gets: its own, unless an earlier trace had it
 * (ranks on several hosts, or in containers, share pids) */
static uint32_t process_id(perfetto *p, const fs_reader *t)
{
    uint32_t pid = fs_reader_header(t)->pid;
    for (int i = 0; i < p->index; i++)
        if (p->pids[i] == pid) {
            pid = SPARE_PID + (uint32_t)p->index;
            break;
        }
    p->pids[p->index] = pid;
    return pid;
}

/* One line per device on stderr: its peak, where the heap profile is */
static void summary(const perfetto *p, const char *path, const fs_reader *t)
{
    char name[64], bytes[32];

    fs_render_trace_name(t, name, sizeof name);
    for (int dn = 0; dn < MAX_DEVICES; dn++) {
        if (!p->dev[dn].peak) continue;
        fs_human_bytes(p->dev[dn].peak, bytes, sizeof bytes);
        fs_progress_printf("fsdpshim export: %s: %s: device %d peaked at %s allocated, %.6f s in\n",
                           path, name, dn, bytes, (double)p->dev[dn].peak_ns / 1e9);
    }
}

/* Trace `path` as process number p->index; false when it cannot be read */
static bool export_one(perfetto *p, const char *path)
{
    fs_reader *t = fs_export_open(path);
    int rank;

    if (!t) return false;
    fs_reader_read_ordered(t, find_peaks, fs_export_warn, p);
    rank = fs_reader_rank(t); /* a rank record may come after the first events */
    fs_reader_close(t);
    p->ordinal = 0;
    if (!(t = fs_export_open(path))) return false;
    p->base = fs_reader_header(t)->clock_real_ns;
    if (!p->clock) clock_snapshot(p, p->base);
    p->clock = true;
    p->pid = process_id(p, t);
    describe_process(p, t, rank);
    fs_replayer_ops ops = {.site = block_site,
                           .added = block_added,
                           .gone = block_gone,
                           .opened = range_opened,
                           .closed = range_closed,
                           .devices = MAX_DEVICES};
    p->rp = fs_replayer_create(&ops, p);
    fs_reader_read_ordered(t, write_event, NULL, p);
    /* what is still open ends with the trace */
    for (uint32_t id = 1; id <= fs_pair_ids_count(&p->thread_ids); id++) {
        wait_end(p, t, id, p->last_ns);
        fs_replayer_end_thread(p->rp, t, p->threads[id - 1].tid, p->last_ns);
    }
    write_profile(p, t);
    summary(p, path, t);
    fs_reader_close(t);
    return true;
}

int fs_export_perfetto(const fs_export_opts *o, int ntraces, char **traces)
{
    perfetto p = {0};
    char path[4096] = "";
    int status = 0, nread = 0;

    if (o->out && strcmp(o->out, "-")) snprintf(path, sizeof path, "%s", o->out);
    if (!(p.pids = calloc((size_t)ntraces, sizeof *p.pids))) fs_analysis_oom("export");
    if (o->symbols && !(p.sym = fs_symbols_create(fs_export_warn, NULL))) fs_analysis_oom("export");
    if (!(p.f = fs_export_create(path))) {
        status = FS_EXIT_BAD_INPUT;
    } else {
        for (int i = 0; i < ntraces; i++) {
            p.index = i;
            if (export_one(&p, traces[i]))
                nread++;
            else
                status = FS_EXIT_BAD_INPUT;
            trace_reset(&p);
        }
        if (!fs_export_finish(p.f, path))
            status = FS_EXIT_BAD_INPUT;
        else
            fs_progress_printf("fsdpshim export: %d trace%s, %" PRIu64
                               " event%s read, written to %s\n",
                               nread, fs_plural((uint64_t)nread), p.events, fs_plural(p.events),
                               path[0] ? path : "stdout");
    }
    fs_pb_free(&p.pkt);
    fs_pb_free(&p.dump);
    free(p.stack);
    free(p.pids);
    fs_symbols_destroy(p.sym);
    return status;
}
