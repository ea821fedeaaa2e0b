/* strings.c - interned strings: the same bytes get the same id, defined in
 * the trace (FS_REC_STRING) once. Strings name files, functions, modules,
 * threads and annotations, so they are few and new ones are rare; one
 * mutex over an open-addressing table is enough. */
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint64_t hash;
    uint32_t id, len;
    char *bytes;
} entry;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static entry *table;
static size_t cap, used;

/* FNV-1a: short keys, no need for more. */
static uint64_t hash_of(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h | 1; /* 0 marks an empty slot */
}

static bool grow(void)
{
    size_t ncap = cap ? cap * 2 : 1024;
    entry *n = calloc(ncap, sizeof *n);
    if (!n) return false;
    for (size_t i = 0; i < cap; i++) {
        if (!table[i].hash) continue;
        size_t j = table[i].hash & (ncap - 1);
        while (n[j].hash)
            j = (j + 1) & (ncap - 1);
        n[j] = table[i];
    }
    free(table);
    table = n;
    cap = ncap;
    return true;
}

uint32_t fs_trace_string(const char *s, size_t len)
{
    static uint8_t rec[FS_FMT_MAX_RECORD];
    uint64_t h;
    uint32_t id = 0;

    if (!fs_trace_defs_level()) return 0;
    if (len > FS_FMT_MAX_STRING) len = FS_FMT_MAX_STRING;
    h = hash_of(s, len);
    pthread_mutex_lock(&lock);
    if ((used + 1) * 2 > cap && !grow()) goto out;
    size_t i = h & (cap - 1);
    for (; table[i].hash; i = (i + 1) & (cap - 1)) {
        entry *e = &table[i];
        if (e->hash == h && e->len == len && !memcmp(e->bytes, s, len)) {
            id = e->id;
            goto out;
        }
    }
    char *copy = malloc(len + 1);
    if (!copy) goto out;
    memcpy(copy, s, len);
    copy[len] = 0;
    table[i] = (entry){.hash = h, .id = (uint32_t)++used, .len = (uint32_t)len, .bytes = copy};
    id = table[i].id;
    /* defined under the lock: no other thread can use the id before it */
    fs_trace_define(rec, fs_fmt_put_string(id, s, len, rec));
out:
    pthread_mutex_unlock(&lock);
    return id;
}

/* A scan of the whole table: asked only for the labels of the live
 * statistics page's sites, each once (the caller keeps them). */
bool fs_trace_string_text(uint32_t id, char *out, size_t len)
{
    bool found = false;

    if (!id || !len) return false;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < cap && !found; i++) {
        if (!table[i].hash || table[i].id != id) continue;
        snprintf(out, len, "%s", table[i].bytes);
        found = true;
    }
    pthread_mutex_unlock(&lock);
    return found;
}

/* fork: no thread may be inside the table across it (session.c). */
void fs_trace_strings_lock(void)
{
    pthread_mutex_lock(&lock);
}

void fs_trace_strings_unlock(bool child)
{
    if (child)
        pthread_mutex_init(&lock, NULL);
    else
        pthread_mutex_unlock(&lock);
}
