/* cli.h - the fsdpshim command: its subcommand table and the pieces the
 * launcher is made of.
 *
 * Each subcommand is one file with one entry point, command_X(argc, argv),
 * where argv[0] is the subcommand's name. Exit codes: 0 ok, 1 bad input,
 * 2 usage, 3 not built yet (a command or option this version documents but
 * does not have), and, for `run`, the program's own status, or 126 / 127
 * as a shell gives them when the program cannot be run / is not found. */
#ifndef FS_CLI_H
#define FS_CLI_H

#include "exit_status.h"

#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

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

/* options.c - one option of a launcher: a value option (`value` set) or a
 * flag (`flag` set); short_name, as "-o", may be NULL. */
typedef struct fs_option {
    const char *name;
    const char *short_name;
    const char **value;
    bool *flag;
} fs_option;

/* Parses argv[1..] up to the command line to run (after `--`, or the first
 * word that is not an option) and returns -1 with *first its index, or the
 * exit status: 0 after printing usage for -h/--help, FS_EXIT_USAGE after a
 * message for an unknown option, a missing value or no command. */
int fs_parse_options(int argc, char **argv, const fs_option *opts, size_t n, void (*usage)(FILE *),
                     int *first);

/* run.c - sets up the environment of a program run under the shim: libfsdpshim.so
 * (lib_opt, else FSDPSHIM_LIB, else the one installed with this binary)
 * first in LD_PRELOAD, FSDPSHIM_CONF (conf_opt, else the inherited one),
 * and for a Python argv PyTorch's route through the shim. Returns 0, or an
 * exit status after a message naming `who`. */
int fs_shim_environment(const char *who, const char *lib_opt, const char *conf_opt,
                        char *const *argv);

/* run.c - the trace files of a run. Whether CONF (FSDPSHIM_CONF's syntax)
 * turns tracing on: its trace key is events, stacks or python. */
bool fs_conf_traces(const char *conf);
/* Makes the list a traced run's processes name their trace files in (in
 * TMPDIR, else /tmp) and sets FSDPSHIM_TRACE_LIST to it, its path in list;
 * 0, or an exit status after one line naming `who`. */
int fs_trace_list_begin(const char *who, char *list, size_t len);
/* Once the run is over: names each trace file in the list, once, in the
 * order they were opened (a file renamed when its rank became known is
 * listed again by its new name; the old one no longer exists), each one a
 * process could not create (a line "!WHY" from trace/session.c), or says
 * that none was written; then removes the list. Lines start as the
 * library's (fs_cli_note) when who is NULL, else "fsdpshim WHO: ". */
void fs_trace_list_name(const char *list, const char *who);

/* Whether `file` is installed with this binary: in install_dir, else
 * build_dir, each relative to the binary's directory; its path in out. */
bool fs_cli_installed(const char *install_dir, const char *build_dir, const char *file, char *out,
                      size_t len);

/* Checks a trace-name pattern (`record -o`, `attach -o`; docs/cli.md): each
 * % starts %h (host), %p (pid), %r (rank), %q{VAR} (the environment variable
 * VAR of the process that writes the file) or %% (a %), which the shim
 * expands in each process (trace/session.c). 0, or FS_EXIT_USAGE after one
 * line naming the escape that is none of those. */
int fs_cli_trace_name_check(const char *who, const char *given);

/* setenv, and value:old for a path list; -1 after a message naming `who`. */
int fs_cli_setenv(const char *who, const char *name, const char *value);
int fs_cli_prepend(const char *who, const char *name, const char *value);

/* attach.c */
int command_attach(int argc, char **argv);
int command_detach(int argc, char **argv);
void usage_attach(FILE *out);
void usage_detach(FILE *out);

/* sim.c */
int command_sim(int argc, char **argv);
void usage_sim(FILE *out);

/* exec.c - becomes the program as a shell would run it: a name with a slash
 * as is, a bare name from PATH (or, when PATH has none, the file of that
 * name in the working directory), a file without #! under /bin/sh, a .py
 * file that cannot run by itself under the python on PATH. Returns only on
 * failure, with 126 or 127 after one line on stderr naming `who`. */
int fs_exec_program(const char *who, char **argv);

/* Waits for a program started with fork + fs_exec_program, as a shell waits
 * for a foreground job, and returns its exit status as a shell gives it. */
int fs_wait_program(pid_t pid);

/* note.c - one line on stderr, "fsdpshim[PID]: " (or "fsdpshim[PID rank R]: ") first,
 * as the library's own lines start: the program keeps the pid. Quiet under
 * FSDPSHIM_LOG=error. */
void fs_cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* FS_CLI_H */
