/* main.c - `fsdpshim`: dispatch to a subcommand from one table.
 *
 * Later subcommands (the trace analyzer's report, top, export, ...) add a
 * row to `commands` and a file of their own. */
#include "cli.h"

#include <string.h>

static int command_help(int argc, char **argv);
static void usage_help(FILE *out);

static const fs_command commands[] = {
    {"run", "run a program under the shim", command_run, usage_run},
    {"record", "run a program under the shim with tracing on (run --trace)", command_record,
     usage_record},
    {"help", "show this list, or the options of one command", command_help, usage_help},
};
#define N_COMMANDS (sizeof commands / sizeof commands[0])

static const fs_command *find_command(const char *name)
{
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(commands[i].name, name)) return &commands[i];
    return NULL;
}

static void usage_main(FILE *out)
{
    fprintf(out, "usage: fsdpshim COMMAND [ARGS...]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n`fsdpshim help COMMAND` or `fsdpshim COMMAND --help` shows its options.\n");
}

static void usage_help(FILE *out)
{
    fprintf(out, "usage: fsdpshim help [COMMAND]\n");
}

static int command_help(int argc, char **argv)
{
    const fs_command *c;

    if (argc < 2) {
        usage_main(stdout);
        return 0;
    }
    if (argc > 2 || !(c = find_command(argv[1]))) {
        fprintf(stderr, "fsdpshim help: unknown command '%s'\n", argv[1]);
        usage_main(stderr);
        return FS_EXIT_USAGE;
    }
    c->usage(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    const fs_command *c;

    if (argc < 2) {
        usage_main(stderr);
        return FS_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) return command_help(1, argv + 1);
    c = find_command(argv[1]);
    if (!c) {
        fprintf(stderr, "fsdpshim: unknown command '%s'\n", argv[1]);
        usage_main(stderr);
        return FS_EXIT_USAGE;
    }
    return c->run(argc - 1, argv + 1);
}
