/* size_parse.h - the sim's size syntax, shared with the CLI. */
#ifndef SIM_SIZE_PARSE_H
#define SIM_SIZE_PARSE_H

#include <stddef.h>

/* Parses "123", "64K", "512M", "16G", "1T" (also "KiB"/"MB"-style
 * suffixes; binary multiples either way); 0 on error. */
size_t sim_parse_size(const char *s);

#endif /* SIM_SIZE_PARSE_H */
