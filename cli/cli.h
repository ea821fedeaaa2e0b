/* cli.h - the fsdpshim command's subcommand table.
 *
 * Each subcommand is one file with one entry point, command_X(argc, argv),
 * where argv[0] is the subcommand's name. Exit codes: 0 ok, 1 bad input,
 * 2 usage. */
#ifndef FS_CLI_H
#define FS_CLI_H

#include <stdio.h>

#define FS_EXIT_USAGE 2

typedef struct fs_command {
    const char *name;
    const char *summary; /* one line for `fsdpshim help` */
    int (*run)(int argc, char **argv);
    void (*usage)(FILE *out); /* `fsdpshim help NAME` and `fsdpshim NAME --help` */
} fs_command;

/* run.c */
int command_run(int argc, char **argv);
int command_record(int argc, char **argv);
void usage_run(FILE *out);
void usage_record(FILE *out);

#endif /* FS_CLI_H */
