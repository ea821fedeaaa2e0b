/* conf_lex.h - the syntax of FSDPSHIM_CONF and PYTORCH_CUDA_ALLOC_CONF:
 * key:value pairs separated by commas, a value possibly a bracketed list
 * (roundup_power2_divisions:[256:1,512:2,>:4]), whitespace anywhere ignored
 * as PyTorch's own tokenizer ignores it. Shared by the library (which applies
 * the keys) and the CLI (which carries a user's PyTorch keys into the shim's
 * configuration), so that both read a string the same way. */
#ifndef FS_CONF_LEX_H
#define FS_CONF_LEX_H

#include <stdbool.h>

/* Removes every whitespace character from s, in place. */
void fs_conf_squeeze(char *s);

/* The next pair of a squeezed string, split in place: *key, and *value after
 * the first ':' (NULL when the entry has no ':'). Empty entries (",,") are
 * skipped. *cursor starts at the string and is advanced; returns false when
 * no pair is left. */
bool fs_conf_next(char **cursor, char **key, char **value);

/* Whether the configuration string `conf` (squeezed or not; NULL is empty)
 * sets `key`. */
bool fs_conf_sets(const char *conf, const char *key);

#endif /* FS_CONF_LEX_H */
