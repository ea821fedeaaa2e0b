/* cmdline.h - the analyzer's command lines: every mistake is one line on
 * stderr that names the option or value at fault, then exit status 2, as
 * `fsdpshim export` has always done, instead of the whole usage text. */
#ifndef FS_CMDLINE_H
#define FS_CMDLINE_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* What fs_getopt returns after it has said what was wrong. */
#define FS_GETOPT_BAD '!'

/* "fsdpshim COMMAND: MESSAGE (fsdpshim COMMAND --help)" on stderr; returns
 * the usage status (FS_EXIT_USAGE) for the caller to return. */
int fs_usage_error(const char *command, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* getopt_long over argv (argv[0] the command's name) with getopt's own
 * messages off: an unknown option or a missing value is said in one line
 * naming it, and FS_GETOPT_BAD returned. Otherwise as getopt_long. */
int fs_getopt(int argc, char *const *argv, const char *shortopts, const struct option *longopts);

/* What a command returns for an option its own cases do not take: for -h,
 * its usage on stdout and 0; otherwise the usage status, fs_getopt having
 * said what was wrong. */
int fs_option_rest(int c, void (*usage)(FILE *out));

/* A count: decimal digits only (no sign, no space), at most max. */
bool fs_parse_count(const char *arg, uint64_t max, uint64_t *out);

#endif /* FS_CMDLINE_H */
