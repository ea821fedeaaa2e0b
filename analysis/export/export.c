/* export.c - `fsdpshim export --memviz|--folded|--chrome|--perfetto [-o OUT]
 * TRACE...`: traces in the formats other tools read (docs/cli.md): PyTorch's
 * memory_viz pickle (export_memviz.c), folded stacks for flame graphs
 * (export_folded.c), Chrome trace event JSON for Perfetto
 * (export_chrome.c), Perfetto's own protobuf format (export_perfetto.c).
 *
 * This file owns the command line (one format, its options, checked before
 * any trace is read, each mistake named in one line); where outputs go and
 * the helpers more than one format needs are output.c's (export.h); each
 * format reads the traces in time order itself (fs_reader_read_ordered), as
 * many times as it needs. */
#include "analysis.h"
#include "cmdline.h"
#include "export.h"
#include "progress.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void usage_export(FILE *out)
{
    fprintf(
        out,
        "usage: fsdpshim export --memviz|--folded|--chrome|--perfetto [-o OUT] [OPTIONS]\n"
        "                       TRACE...\n"
        "\n"
        "Writes traces in the formats other tools read. Several traces are the ranks of\n"
        "one job.\n"
        "\n"
        "  --memviz   the pickle that PyTorch's memory_viz page (pytorch.org/memory_viz) and\n"
        "             `python -m torch.cuda._memory_viz` load, as torch.cuda.memory._snapshot()\n"
        "             returns it: the segments and blocks at one moment and the trace of the\n"
        "             allocator's actions up to it; one pickle per trace (rank)\n"
        "    --at peak|end|SECONDS  the moment [peak]: each device's peak of allocated\n"
        "             bytes (live blocks, PyTorch's max_memory_allocated), the end, or\n"
        "             SECONDS since the trace began; the trace entries end there too\n"
        "    --max-entries N  keep the newest N trace entries per device [100000]; 0: all\n"
        "  --folded   folded stacks (\"outer;...;inner WEIGHT\" lines) for flamegraph.pl,\n"
        "             speedscope or inferno; ranks merged\n"
        "    --weight peak|total|count  bytes live at the device's peak [peak], all bytes\n"
        "             allocated, or the number of allocations\n"
        "    --by stack|frame|annotation|python  the stacks: native (default), the\n"
        "             allocating frame alone, NVTX ranges, or Python frames\n"
        "  --chrome   Chrome trace event JSON (Perfetto, chrome://tracing): allocated and\n"
        "             reserved counters per device, collectives, rate-limiter waits and\n"
        "             NVTX ranges on their threads; one process per rank\n"
        "    --limit N  refuse a trace of more than N events [2000000]; 0: no limit\n"
        "  --perfetto Perfetto's own protobuf trace (ui.perfetto.dev, trace_processor), for\n"
        "             traces of any length: the --chrome tracks, plus allocated and reserved\n"
        "             counters per stream (and per rank over its devices), and a heap profile\n"
        "             of the bytes live at each device's peak per stack (a flame graph)\n"
        "\n"
        "  -o OUT     the output [stdout; for --memviz and --perfetto, not a terminal].\n"
        "             --memviz with several traces: a directory (DIR/NAME.pickle, NAME the\n"
        "             trace's file name without extension) or a pattern where %%r is the rank\n"
        "             (the pid when the trace has none), %%p the pid, %%n NAME, %%%% a %%\n"
        "  --no-symbols  native frames as MODULE+0xOFFSET, not FUNCTION at FILE:LINE\n"
        "\n"
        "examples:\n"
        "  fsdpshim export --memviz -o snapshot.pickle train-4242.fst\n"
        "             (then drop snapshot.pickle on pytorch.org/memory_viz)\n"
        "  fsdpshim export --perfetto -o job.pftrace rank*.fst\n"
        "  fsdpshim export --folded train-4242.fst | flamegraph.pl >sites.svg\n"
        "\n"
        "Exit status: 0 ok, 1 a file is not a readable trace or an output cannot be\n"
        "written, 2 usage.\n");
}

/* ---- the command line ------------------------------------------------------------------ */

enum format { NO_FORMAT, MEMVIZ, FOLDED, CHROME, PERFETTO };
static const char *const format_options[] = {"", "--memviz", "--folded", "--chrome", "--perfetto"};

static bool parse_at(const char *arg, fs_export_opts *o)
{
    char *end;
    double s;
    if (!strcmp(arg, "peak") || !strcmp(arg, "end")) {
        o->at = arg[0] == 'p' ? FS_AT_PEAK : FS_AT_END;
        return true;
    }
    s = strtod(arg, &end);
    if (!*arg || *end || !isfinite(s) || s < 0 || s > 1e9) return false;
    o->at = FS_AT_TIME;
    o->at_ns = (uint64_t)(s * 1e9 + 0.5);
    return true;
}

static bool parse_weight(const char *arg, enum fs_export_weight *w)
{
    static const char *const names[] = {"peak", "total", "count"};
    int i = fs_site_choice(arg, names, 3);
    if (i < 0) return false;
    *w = (enum fs_export_weight)i;
    return true;
}

int command_export(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"memviz", no_argument, NULL, 'M'},
        {"folded", no_argument, NULL, 'F'},
        {"chrome", no_argument, NULL, 'C'},
        {"perfetto", no_argument, NULL, 'P'},
        {"output", required_argument, NULL, 'o'},
        {"no-symbols", no_argument, NULL, 'N'},
        {"max-entries", required_argument, NULL, 'e'},
        {"at", required_argument, NULL, 'a'},
        {"weight", required_argument, NULL, 'w'},
        {"by", required_argument, NULL, 'b'},
        {"limit", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    fs_export_opts o = {.symbols = true,
                        .max_entries = 100000,
                        .at = FS_AT_PEAK,
                        .by = FS_BY_STACK,
                        .limit = 2000000};
    enum format format = NO_FORMAT;
    const char *given[5] = {NULL}; /* per format: an option only it has, as given */
    uint64_t n;
    int c;

    optind = 1;
    while ((c = fs_getopt(argc, argv, "ho:", longopts)) != -1) {
        enum format f = c == 'M'   ? MEMVIZ
                        : c == 'F' ? FOLDED
                        : c == 'C' ? CHROME
                        : c == 'P' ? PERFETTO
                                   : NO_FORMAT;
        if (f) {
            if (format && format != f)
                return fs_usage_error("export", "%s and %s: one format at a time",
                                      format_options[format], format_options[f]);
            format = f;
            continue;
        }
        switch (c) {
        case 'o':
            o.out = optarg;
            break;
        case 'N':
            o.symbols = false;
            break;
        case 'e':
            if (!fs_parse_count(optarg, SIZE_MAX / 64, &n))
                return fs_usage_error("export", "--max-entries '%s': not a count", optarg);
            o.max_entries = (size_t)n;
            given[MEMVIZ] = "--max-entries";
            break;
        case 'a':
            if (!parse_at(optarg, &o))
                return fs_usage_error("export", "--at '%s': not peak, end or a number of seconds",
                                      optarg);
            given[MEMVIZ] = "--at";
            break;
        case 'w':
            if (!parse_weight(optarg, &o.weight))
                return fs_usage_error("export", "--weight '%s': not peak, total or count", optarg);
            given[FOLDED] = "--weight";
            break;
        case 'b':
            if (!fs_site_by_parse(optarg, &o.by))
                return fs_usage_error("export", "--by '%s': not stack, frame, annotation or python",
                                      optarg);
            given[FOLDED] = "--by";
            break;
        case 'l':
            if (!fs_parse_count(optarg, UINT64_MAX, &o.limit))
                return fs_usage_error("export", "--limit '%s': not a count", optarg);
            given[CHROME] = "--limit";
            break;
        default: /* -h, or a mistake fs_getopt has said */
            return fs_option_rest(c, usage_export);
        }
    }
    if (!format)
        return fs_usage_error("export",
                              "name a format: --memviz, --folded, --chrome or --perfetto");
    for (int f = MEMVIZ; f <= PERFETTO; f++)
        if (given[f] && f != (int)format)
            return fs_usage_error("export", "%s is an option of %s, not of %s", given[f],
                                  format_options[f], format_options[format]);
    if (optind >= argc) return fs_usage_error("export", "no trace named");
    if (format == MEMVIZ && argc - optind > 1 && !fs_export_to_stdout(o.out) &&
        !fs_export_to_directory(o.out) && !strchr(o.out, '%'))
        return fs_usage_error("export",
                              "%d traces make %d pickles: -o a directory, or a pattern with %%r, "
                              "%%p or %%n",
                              argc - optind, argc - optind);
    if (format == MEMVIZ && argc - optind > 1 && fs_export_to_stdout(o.out))
        return fs_usage_error("export",
                              "%d traces make %d pickles: -o a directory, or a pattern with %%r",
                              argc - optind, argc - optind);
    if (format == MEMVIZ && fs_export_to_stdout(o.out) && isatty(STDOUT_FILENO))
        return fs_usage_error("export", "a pickle is binary: name a file with -o");
    if (format == PERFETTO && fs_export_to_stdout(o.out) && isatty(STDOUT_FILENO))
        return fs_usage_error("export", "a Perfetto trace is binary: name a file with -o");

    /* A file that is not a trace is named here, once, and left out: the
     * others are still written, and when none is left nothing is (an empty
     * export would look like a result). */
    int ntraces = 0, unreadable = 0;
    char **traces = argv + optind;
    for (int i = optind; i < argc; i++) {
        char err[4200];
        fs_reader *t = fs_reader_open(argv[i], err, sizeof err);
        if (!t) {
            fs_progress_warn("export", err);
            unreadable++;
            continue;
        }
        fs_reader_close(t);
        traces[ntraces++] = argv[i];
    }
    if (!ntraces) {
        fprintf(stderr, "fsdpshim export: no readable trace; nothing written\n");
        return FS_EXIT_BAD_INPUT;
    }

    int status;
    if (format == FOLDED) { /* top's reading, the files side by side, its own progress */
        status = fs_export_folded(&o, ntraces, traces);
    } else {
        /* the others open each trace twice (the peaks or the counts
         * first), but for a pickle of the end or of a moment */
        unsigned passes = format == MEMVIZ && o.at != FS_AT_PEAK ? 1 : 2;
        fs_progress_start("export", (size_t)ntraces, traces, passes);
        status = format == MEMVIZ     ? fs_export_memviz(&o, ntraces, traces)
                 : format == PERFETTO ? fs_export_perfetto(&o, ntraces, traces)
                                      : fs_export_chrome(&o, ntraces, traces);
        fs_progress_stop();
    }
    return unreadable && !status ? FS_EXIT_BAD_INPUT : status;
}
