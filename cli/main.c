/* main.c - `fsdpshim`: dispatch to a subcommand from one table.
 *
 * The table also lists the commands that docs/cli.md describes but this
 * version does not have yet (the trace analyzer's): each is
 * recognised, described by `help`, and refused with exit status 3, so that a
 * user or a script can tell "not built yet" from a typo (2). When one is
 * built its row gets a run and usage function and a file of its own. */
#include "cli.h"
#include "analysis.h"
#include "reader.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static int command_help(int argc, char **argv);
static void usage_help(FILE *out);

/* A row not built yet is listed apart and refused with 3; its `synopsis` is
 * its planned usage unless it has a usage function. */
static const struct command_row {
    fs_command c;
    bool not_built;
    const char *synopsis;
} commands[] = {
    {{"run", "run a program under the shim", command_run, usage_run}, false, NULL},
    {{"help", "show this list, or the options of one command", command_help, usage_help},
     false,
     NULL},
    {{"record", "run a program under the shim with tracing on (run --trace)", command_record,
      usage_record},
     false,
     NULL},
    {{"sim", "run a program on the simulated device, print its peak memory", command_sim,
      usage_sim},
     false,
     NULL},
    {{"dump", "print a trace's events, one line each", command_dump, usage_dump}, false, NULL},
    {{"report", "summarise traces: peaks, the cache's overhead, OOMs, streams, collectives",
      command_report, usage_report},
     false,
     NULL},
    {{"top",
      "allocation sites by peak live bytes, count, total or temporaries; --live: running "
      "processes' memory",
      command_top, usage_top},
     false,
     NULL},
    {{"leaks", "blocks still allocated at exit, by site, with suppressions", command_leaks,
      usage_leaks},
     false,
     NULL},
    {{"timeline", "allocated and reserved memory over time, per rank and device", command_timeline,
      usage_timeline},
     false,
     NULL},
    {{"diff", "which allocation sites grew from one trace (or rank) to another", command_diff,
      usage_diff},
     false,
     NULL},
    {{"export", "write memory_viz pickles, Chrome or Perfetto traces, or folded stacks",
      command_export, usage_export},
     false,
     NULL},
    {{"replay", "replay traces through the allocator under other configurations", command_replay,
      usage_replay},
     false,
     NULL},
    {{"attach", "trace a job that is already running, without restarting it", command_attach,
      usage_attach},
     false,
     NULL},
    {{"detach", "stop tracing a job attached to, and flush its trace", command_detach,
      usage_detach},
     false,
     NULL},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const struct command_row *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].c.name, name)) return &commands[i];
    return NULL;
}

/* Where the documentation is: installed with this binary (FS_BIN_TO_DOC),
 * else the source tree's docs/ beside a build tree's binary. */
static void docs_line(FILE *out)
{
    char path[PATH_MAX];
    if (fs_cli_installed(FS_BIN_TO_DOC, FS_BIN_TO_SOURCE_DOCS, "cli.md", path, sizeof path)) {
        char *dir = realpath(path, NULL);
        if (dir) *strrchr(dir, '/') = '\0';
        fprintf(out,
                "Documentation: %s/cli.md (every command and option), configuration.md,\n"
                "tracing.md and the rest of that directory.\n",
                dir ? dir : path);
        free(dir);
    } else {
        fprintf(out, "Documentation: docs/cli.md (every command and option) and the rest of docs/\n"
                     "in fsdpshim's source tree.\n");
    }
}

static void usage_main(FILE *out)
{
    fprintf(out, "usage: fsdpshim COMMAND [ARGS...]\n       fsdpshim --version\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!commands[i].not_built)
            fprintf(out, "  %-9s %s\n", commands[i].c.name, commands[i].c.summary);
    bool header = false; /* the section only while some command is not built */
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (commands[i].not_built) {
            if (!header)
                fprintf(out, "\nnot built yet in this version (refused with exit status 3):\n");
            header = true;
            fprintf(out, "  %-9s %s\n", commands[i].c.name, commands[i].c.summary);
        }
    fprintf(out,
            "\nexamples:\n"
            "  fsdpshim run -- python train.py         PyTorch's GPU memory served by the shim\n"
            "  fsdpshim record -o 'run-%%p.fst' -- torchrun --nproc-per-node 2 train.py\n"
            "                                          the same, with a trace per process\n"
            "  fsdpshim report run-*.fst               peaks, OOMs explained, the top sites\n"
            "  fsdpshim sim --mem 80G -- torchrun --nproc-per-node 8 train.py\n"
            "                                          will it fit? a dry run without a GPU\n"
            "\nenvironment:\n"
            "  FSDPSHIM_CONF   the shim's settings, key:value,... such as\n"
            "                  expandable_segments:true,ag_limit:2 (configuration.md)\n"
            "  FSDPSHIM_LOG    what the shim says on stderr: error, warn [default], info, debug\n"
            "  FSDPSHIM_TRACE  the trace files' names [fsdpshim-%%h-%%p.fst] (tracing.md)\n"
            "  FSDPSHIM_LIB    the libfsdpshim.so that run, record and sim preload\n"
            "\n`fsdpshim help COMMAND` or `fsdpshim COMMAND --help` shows its options.\n");
    docs_line(out);
}

static void usage_help(FILE *out)
{
    fprintf(out, "usage: fsdpshim help [COMMAND]\n"
                 "\n"
                 "Lists the commands, or shows the options of one (as `fsdpshim COMMAND --help`).\n"
                 "\n"
                 "example:\n"
                 "  fsdpshim help report\n");
}

static void usage_of(const struct command_row *r, FILE *out)
{
    if (r->c.usage)
        r->c.usage(out);
    else
        fprintf(out,
                "usage: fsdpshim %s\n\n%s.\nNot built yet: this version (%s) refuses it with "
                "exit status 3.\n",
                r->synopsis, r->c.summary, FSDPSHIM_VERSION);
}

static int command_help(int argc, char **argv)
{
    const struct command_row *r;

    if (argc < 2) {
        usage_main(stdout);
        return 0;
    }
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        usage_help(stdout);
        return 0;
    }
    if (argc > 2) {
        fprintf(stderr, "fsdpshim help: one command at a time, not '%s' and '%s'\n", argv[1],
                argv[2]);
        return FS_EXIT_USAGE;
    }
    if (!(r = find_command(argv[1]))) {
        fprintf(stderr, "fsdpshim help: unknown command '%s'; `fsdpshim help` lists them\n",
                argv[1]);
        return FS_EXIT_USAGE;
    }
    usage_of(r, stdout);
    return 0;
}

static int not_built(const struct command_row *r, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage_of(r, stdout);
            return 0;
        }
    fprintf(stderr,
            "fsdpshim %s: not built yet in this version (%s); `fsdpshim help` lists what it "
            "has\n",
            r->c.name, FSDPSHIM_VERSION);
    return FS_EXIT_NOT_BUILT;
}

int main(int argc, char **argv)
{
    const struct command_row *r;

    if (argc < 2) {
        usage_main(stderr);
        return FS_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return command_help(1, argv + 1);
    if (!strcmp(argv[1], "--version")) {
        printf("fsdpshim %s\n", FSDPSHIM_VERSION);
        return 0;
    }
    r = find_command(argv[1]);
    if (!r) {
        fprintf(stderr, "fsdpshim: unknown command '%s'; `fsdpshim help` lists them\n", argv[1]);
        return FS_EXIT_USAGE;
    }
    if (!r->c.run) return not_built(r, argc - 1, argv + 1);
    int status = r->c.run(argc - 1, argv + 1);
    /* A damaged trace is bad input however much of it the command could
     * use: what was skipped has been named on stderr, with its offset. */
    if (status != FS_EXIT_USAGE && fs_reader_saw_damage()) status = FS_EXIT_BAD_INPUT;
    return status;
}
