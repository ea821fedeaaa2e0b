/* pickle.c - a Python pickle writer (pickle.h), by hand.
 *
 * Written here rather than linked: no C library writes pickles that is
 * worth a dependency (the known ones are unmaintained, or embed Python, or
 * C++), and what memory_viz reads is a plain tree of dicts, lists, ints and
 * strings that takes a dozen opcodes. Those opcodes are the ones Python's
 * pickler emits for such a tree at protocol 4 (EMPTY_DICT/MARK/SETITEMS,
 * EMPTY_LIST/MARK/APPENDS, BININT1/BININT2/BININT/LONG1,
 * SHORT_BINUNICODE/BINUNICODE, MEMOIZE, BINGET/LONG_BINGET, TUPLE2,
 * NEWTRUE/NEWFALSE) and all of them are in the unpickler of PyTorch's
 * MemoryViz.js, which knows little else (no FRAME is needed: framing is
 * optional in protocol 4). As Python's pickler does, a list's items are
 * appended 1000 at a time: MemoryViz.js spreads each APPENDS batch into a
 * function call, which a batch of a million items would overflow. */
#include "pickle.h"

#include "export.h"
#include "sites.h"

#include <stdlib.h>
#include <string.h>

#define BATCH     1000 /* list items per APPENDS, as Python's pickler */
#define MAX_DEPTH 32   /* lists open at once */

/* A string written once, then fetched from the memo by its id */
typedef struct memo_string {
    char *s;
    uint32_t id;
} memo_string;

struct fs_pickle {
    FILE *out;
    bool failed;
    uint32_t memo;        /* the next memo id */
    memo_string *strings; /* in the order written */
    size_t nstrings, capstrings;
    fs_text_index by_text;     /* strings by text */
    uint32_t items[MAX_DEPTH]; /* per open list: items written so far */
    int depth;
    char *clean; /* a string made valid UTF-8 */
    size_t cleancap;
};

static void put(fs_pickle *p, const void *bytes, size_t n)
{
    if (!p->failed && fwrite(bytes, 1, n, p->out) != n) p->failed = true;
}

static void op(fs_pickle *p, uint8_t code)
{
    put(p, &code, 1);
}

static void op_le(fs_pickle *p, uint8_t code, uint64_t v, int nbytes)
{
    uint8_t b[9] = {code};
    for (int i = 0; i < nbytes; i++)
        b[1 + i] = (uint8_t)(v >> (8 * i));
    put(p, b, 1 + (size_t)nbytes);
}

fs_pickle *fs_pickle_open(FILE *out)
{
    fs_pickle *p = calloc(1, sizeof *p);
    if (!p) fs_analysis_oom("export");
    p->out = out;
    op_le(p, 0x80, 4, 1); /* PROTO 4 */
    return p;
}

bool fs_pickle_close(fs_pickle *p)
{
    op(p, '.'); /* STOP */
    bool ok = !p->failed && fflush(p->out) == 0 && !ferror(p->out);
    for (size_t i = 0; i < p->nstrings; i++)
        free(p->strings[i].s);
    free(p->strings);
    fs_text_index_free(&p->by_text);
    free(p->clean);
    free(p);
    return ok;
}

static uint32_t memoize(fs_pickle *p)
{
    op(p, 0x94); /* MEMOIZE: the next id, as Python and MemoryViz.js count */
    return p->memo++;
}

void fs_pickle_get(fs_pickle *p, uint32_t id)
{
    if (id < 256)
        op_le(p, 'h', id, 1); /* BINGET */
    else
        op_le(p, 'j', id, 4); /* LONG_BINGET */
}

void fs_pickle_dict_begin(fs_pickle *p)
{
    op(p, '}'); /* EMPTY_DICT */
    op(p, '('); /* MARK */
}

void fs_pickle_dict_end(fs_pickle *p)
{
    op(p, 'u'); /* SETITEMS */
}

uint32_t fs_pickle_list_begin(fs_pickle *p, bool memo)
{
    uint32_t id = 0;
    op(p, ']'); /* EMPTY_LIST */
    if (memo) id = memoize(p);
    op(p, '(');
    if (p->depth < MAX_DEPTH) p->items[p->depth] = 0;
    p->depth++;
    return id;
}

void fs_pickle_item(fs_pickle *p)
{
    if (p->depth < 1 || p->depth > MAX_DEPTH) return; /* deeper lists are never batched */
    uint32_t *n = &p->items[p->depth - 1];
    if (*n && *n % BATCH == 0) {
        op(p, 'e'); /* APPENDS the batch so far */
        op(p, '(');
    }
    (*n)++;
}

void fs_pickle_list_end(fs_pickle *p)
{
    op(p, 'e');
    p->depth--;
}

void fs_pickle_int(fs_pickle *p, int64_t v)
{
    if (v >= 0 && v < 256) {
        op_le(p, 'K', (uint64_t)v, 1); /* BININT1 */
    } else if (v >= 0 && v < 65536) {
        op_le(p, 'M', (uint64_t)v, 2); /* BININT2 */
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op_le(p, 'J', (uint64_t)(uint32_t)(int32_t)v, 4); /* BININT */
    } else {
        /* LONG1: the fewest little-endian two's-complement bytes */
        int n = 1;
        while (n < 8 && (v >> (8 * n - 1)) != 0 && (v >> (8 * n - 1)) != -1)
            n++;
        uint8_t b[10] = {0x8a, (uint8_t)n};
        for (int i = 0; i < n; i++)
            b[2 + i] = (uint8_t)((uint64_t)v >> (8 * i));
        put(p, b, 2 + (size_t)n);
    }
}

void fs_pickle_bool(fs_pickle *p, bool v)
{
    op(p, v ? 0x88 : 0x89); /* NEWTRUE, NEWFALSE */
}

void fs_pickle_tuple2(fs_pickle *p)
{
    op(p, 0x86); /* TUPLE2 */
}

/* s, or a copy with each byte that is not UTF-8 replaced by '?' */
static const char *valid_utf8(fs_pickle *p, const char *s, size_t n)
{
    size_t i = 0, k;
    while (i < n && (k = fs_utf8_len((const unsigned char *)s + i, n - i)))
        i += k;
    if (i == n) return s;
    if (n + 1 > p->cleancap) {
        char *c = realloc(p->clean, n + 1);
        if (!c) fs_analysis_oom("export");
        p->clean = c;
        p->cleancap = n + 1;
    }
    memcpy(p->clean, s, n + 1);
    for (i = 0; i < n;) {
        k = fs_utf8_len((const unsigned char *)p->clean + i, n - i);
        if (!k) p->clean[i] = '?', k = 1;
        i += k;
    }
    return p->clean;
}

static const char *string_text(const void *owner, uint32_t i)
{
    return ((const fs_pickle *)owner)->strings[i].s;
}

void fs_pickle_str(fs_pickle *p, const char *s)
{
    uint64_t hash = fs_hash_text(s);
    uint32_t at = fs_text_index_find(&p->by_text, s, hash, string_text, p);
    size_t n = strlen(s);
    const char *text = valid_utf8(p, s, n);

    if (at) {
        fs_pickle_get(p, p->strings[at - 1].id);
        return;
    }
    if (n < 256)
        op_le(p, 0x8c, n, 1); /* SHORT_BINUNICODE */
    else
        op_le(p, 'X', n, 4); /* BINUNICODE */
    put(p, text, n);
    p->strings = fs_grow(p->strings, &p->capstrings, p->nstrings + 1, sizeof *p->strings);
    memo_string *m = &p->strings[p->nstrings];
    if (!(m->s = strdup(s))) fs_analysis_oom("export");
    m->id = memoize(p);
    fs_text_index_add(&p->by_text, (uint32_t)p->nstrings++, hash);
}

void fs_pickle_key_int(fs_pickle *p, const char *key, int64_t v)
{
    fs_pickle_str(p, key);
    fs_pickle_int(p, v);
}

void fs_pickle_key_str(fs_pickle *p, const char *key, const char *v)
{
    fs_pickle_str(p, key);
    fs_pickle_str(p, v);
}
