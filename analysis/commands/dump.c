/* dump.c - `fsdpshim dump TRACE...`: every event of each trace as one text
 * line, its stacks on indented lines below it (docs/cli.md).
 *
 * Lines are key=value after the time and the event name, so they grep and
 * cut well. Native frames are printed as module+offset, not symbolised
 * (the analyzer's commands symbolise); Python frames as file:line:function.
 * A damaged trace prints everything that can be recovered; what was skipped
 * is named, with its offset, on stderr, and the exit status is 1 (as for
 * every command: cli/main.c). */
#include "analysis.h"
#include "cmdline.h"
#include "reader.h"
#include "render.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

typedef struct dump_opts {
    bool stacks, all;
    FILE *out;
} dump_opts;

void usage_dump(FILE *out)
{
    fprintf(out,
            "usage: fsdpshim dump [--no-stacks] [--all] TRACE...\n"
            "\n"
            "Prints each trace's header as a `#` line, then every event, one per line:\n"
            "  TIME EVENT tid=T dev=D stream=S addr=A size=N [requested=N] allocated=N reserved=N\n"
            "       [pool=..|op=..|name=..] [annot=A/B/C]\n"
            "TIME is seconds since the trace started. Below an allocation, its native frames\n"
            "(`#N MODULE+0xOFFSET`, unsymbolised) and Python frames (`py#N FILE:LINE:FUNCTION`).\n"
            "\n"
            "  --no-stacks  leave the frames out\n"
            "  --all        also print the definitions (strings, stacks, modules, threads)\n"
            "\n"
            "A damaged trace (a killed writer's torn tail, a corrupt block) prints what can be\n"
            "recovered, each skipped part named on stderr with its offset, and exits 1.\n"
            "\n"
            "example:\n"
            "  fsdpshim dump --no-stacks train-4242.fst | head\n"
            "\n"
            "Exit status: 0 ok, 1 a file is not a readable trace or is damaged, 2 usage.\n");
}

static const char *str(fs_reader *t, uint32_t id)
{
    return fs_render_str(t, id);
}

static void print_annot(FILE *out, fs_reader *t, uint32_t id)
{
    char path[4096];
    if (fs_render_annot(t, id, path, sizeof path)) fprintf(out, " annot=%s", path);
}

static void print_frames(FILE *out, fs_reader *t, const fs_fmt_event *ev)
{
    const uint64_t *frames;
    const fs_fmt_pyframe *py;
    uint32_t n = ev->stack ? fs_reader_stack(t, ev->stack, &frames) : 0;
    char text[4200];

    for (uint32_t i = 0; i < n; i++) {
        fs_render_frame(t, frames[i], text, sizeof text);
        fprintf(out, "    #%u %s\n", i, text);
    }
    n = ev->pystack ? fs_reader_pystack(t, ev->pystack, &py) : 0;
    for (uint32_t i = 0; i < n; i++) {
        fs_render_pyframe(t, &py[i], text, sizeof text);
        fprintf(out, "    py#%u %s\n", i, text);
    }
}

static bool is_memory(unsigned kind)
{
    return (kind >= FS_REC_ALLOC && kind <= FS_REC_OOM) || kind == FS_REC_SNAP_BLOCK ||
           kind == FS_REC_SNAP_SEGMENT;
}

static void print_event(FILE *out, fs_reader *t, const fs_fmt_event *ev, uint32_t tid)
{
    fprintf(out, "%" PRIu64 ".%09" PRIu64 " %s tid=%u", ev->time_ns / 1000000000u,
            ev->time_ns % 1000000000u, fs_fmt_kind_name(ev->kind), tid);
    if (ev->device >= 0) fprintf(out, " dev=%d stream=0x%" PRIx64, ev->device, ev->stream);
    if (ev->addr) fprintf(out, " addr=0x%" PRIx64, ev->addr);
    if (ev->size || is_memory(ev->kind)) fprintf(out, " size=%" PRIu64, ev->size);
    if (ev->requested) fprintf(out, " requested=%" PRIu64, ev->requested);
    if (is_memory(ev->kind))
        fprintf(out, " allocated=%" PRIu64 " reserved=%" PRIu64, ev->allocated, ev->reserved);
    switch (ev->kind) {
    case FS_REC_ALLOC:
        if (ev->aux & 3) fprintf(out, " pool=%s", (ev->aux & 3) == 1 ? "small" : "large");
        if (ev->aux & FS_FMT_ALLOC_STREAM_ORDERED) fprintf(out, " async");
        break;
    case FS_REC_FREE_REQUESTED:
        if (ev->aux & FS_FMT_FREE_STREAM_ORDERED) fprintf(out, " async");
        break;
    case FS_REC_OOM:
        fprintf(out, " largest_free=%" PRIu64, ev->aux);
        if (fs_reader_header(t)->version < 2) break; /* the rest came with version 2 */
        if (ev->aux2 != FS_FMT_UNKNOWN) fprintf(out, " device_free=%" PRIu64, ev->aux2);
        fprintf(out, " other_streams_free=%" PRIu64 " pending=%" PRIu64, ev->aux3, ev->aux4);
        break;
    case FS_REC_STREAM_CREATE:
    case FS_REC_POOL_HIT:
        fprintf(out, " flags=%" PRIu64 " priority=%" PRId64, ev->aux, (int64_t)ev->aux2);
        break;
    case FS_REC_COLLECTIVE: {
        const char *op = fs_fmt_coll_name((unsigned)ev->aux);
        fprintf(out, " op=%s comm=0x%" PRIx64, op ? op : "?", ev->aux2);
        break;
    }
    case FS_REC_VMM: {
        const char *op = fs_fmt_vmm_name((unsigned)ev->aux);
        fprintf(out, " op=%s", op ? op : "?");
        if (ev->aux2) fprintf(out, " handle=0x%" PRIx64, ev->aux2);
        break;
    }
    case FS_REC_RL_WAIT_START:
        fprintf(out, " in_flight=%" PRIu64 " in_flight_bytes=%" PRIu64, ev->aux, ev->aux2);
        break;
    case FS_REC_RL_WAIT_END:
        fprintf(out, " fence=0x%" PRIx64, ev->aux);
        break;
    case FS_REC_SNAP_BLOCK:
        fprintf(out, " state=%s",
                ev->aux == FS_BLOCK_LIVE     ? "live"
                : ev->aux == FS_BLOCK_CACHED ? "cached"
                                             : "pending");
        break;
    default:
        break;
    }
    if (ev->name) fprintf(out, " name=%s", str(t, ev->name));
    print_annot(out, t, ev->annot);
    fputc('\n', out);
}

static void print_definition(FILE *out, fs_reader *t, const fs_fmt_record *r)
{
    switch (r->kind) {
    case FS_REC_STRING:
        fprintf(out, "# string %u %.*s\n", r->id, (int)r->u.string.len, r->u.string.bytes);
        break;
    case FS_REC_STACK:
        fprintf(out, "# stack %u frames=%u\n", r->id, r->u.stack.n);
        break;
    case FS_REC_PYSTACK:
        fprintf(out, "# pystack %u frames=%u\n", r->id, r->u.pystack.n);
        break;
    case FS_REC_ANNOT:
        fprintf(out, "# annotation %u parent=%u name=%s\n", r->id, r->u.annot.parent,
                str(t, r->u.annot.name));
        break;
    case FS_REC_MODULE:
        fprintf(out, "# module 0x%" PRIx64 "-0x%" PRIx64 " %s build_id=", r->u.module.base,
                r->u.module.base + r->u.module.size, str(t, r->u.module.path));
        for (uint32_t i = 0; i < r->u.module.build_id_len; i++)
            fprintf(out, "%02x", r->u.module.build_id[i]);
        fputc('\n', out);
        break;
    case FS_REC_THREAD:
        fprintf(out, "# thread %u %s\n", r->u.thread.tid, str(t, r->u.thread.name));
        break;
    case FS_REC_DROPPED:
        fprintf(out, "# dropped %" PRIu64 " event%s\n", r->u.dropped.count,
                fs_plural(r->u.dropped.count));
        break;
    case FS_REC_RANK:
        fprintf(out, "# rank %d of %d\n", r->u.rank.rank, r->u.rank.world);
        break;
    case FS_REC_CONFIG:
        fprintf(out, "# config %s\n", str(t, r->u.config.text));
        break;
    case FS_REC_DEVICE:
        fprintf(out, "# device %d total=%" PRIu64 "\n", r->u.device.device, r->u.device.total);
        break;
    default:
        break;
    }
}

static int visit(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid)
{
    const dump_opts *o = ctx;
    bool event = r->kind <= FS_REC_EVENT_LAST || r->kind == FS_REC_SNAP_SEGMENT ||
                 r->kind == FS_REC_SNAP_BLOCK;

    if (!event) {
        if (o->all || r->kind == FS_REC_DROPPED || r->kind == FS_REC_RANK ||
            r->kind == FS_REC_CONFIG || r->kind == FS_REC_DEVICE)
            print_definition(o->out, t, r);
        return 0;
    }
    print_event(o->out, t, &r->ev, tid);
    if (o->stacks) print_frames(o->out, t, &r->ev);
    return 0;
}

static void warn(void *ctx, const char *line)
{
    const dump_opts *o = ctx;
    fflush(o->out);
    fprintf(stderr, "fsdpshim dump: %s\n", line);
}

static void print_header(FILE *out, fs_reader *t)
{
    const fs_fmt_header *h = fs_reader_header(t);
    static const char *const levels[] = {"off", "events", "stacks", "python"};

    fprintf(out,
            "# trace %s: format %u, pid %u, rank %d, host %s, exe %s, level %s, frames %u%s, "
            "clock_monotonic_ns %" PRIu64 ", clock_realtime_ns %" PRIu64 "\n",
            fs_reader_file(t), h->version, h->pid, h->rank, h->host, h->exe,
            h->trace_level < 4 ? levels[h->trace_level] : "?", h->frames,
            h->features & FS_FMT_FEAT_SNAPSHOT ? ", snapshot" : "", h->clock_mono_ns,
            h->clock_real_ns);
}

int command_dump(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"no-stacks", no_argument, NULL, 's'},
        {"all", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    dump_opts o = {.stacks = true, .out = stdout};
    int c, status = 0;

    optind = 1;
    while ((c = fs_getopt(argc, argv, "h", longopts)) != -1) {
        switch (c) {
        case 's':
            o.stacks = false;
            break;
        case 'a':
            o.all = true;
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_dump);
        }
    }
    if (optind >= argc) return fs_usage_error(argv[0], "no trace named");
    for (int i = optind; i < argc; i++) {
        char err[4200];
        fs_reader *t = fs_reader_open(argv[i], err, sizeof err);
        if (!t) {
            fprintf(stderr, "fsdpshim dump: %s\n", err);
            status = FS_EXIT_BAD_INPUT;
            continue;
        }
        print_header(o.out, t);
        fs_reader_read(t, visit, warn, &o);
        const fs_reader_damage *d = fs_reader_damage_of(t);
        if (d->skipped_blocks || d->skipped_bytes)
            fprintf(o.out, "# damaged: %" PRIu64 " block%s and %" PRIu64 " bytes skipped\n",
                    d->skipped_blocks, fs_plural(d->skipped_blocks), d->skipped_bytes);
        fs_reader_close(t);
    }
    return status;
}
