/* annot.c - per-thread annotation stacks (annot.h): NVTX ranges and the
 * public API's pushes share them.
 *
 * A stack is a node in a tree (parent, domain, name), interned once into an
 * id, so an event names its whole stack with one number. Nodes live for the
 * process and are defined in the trace lazily, parents first, the first
 * time an event names them while tracing: annotations pushed before the
 * trace started (tracing begins at the first CUDA call) still come out
 * whole. One thread stack holds every domain's ranges, each entry tagged
 * with its domain, because that merged stack is what the user sees; a pop in
 * domain D removes D's innermost range (NVTX's rule) and the ranges above it
 * are re-parented. */
#include "annot.h"
#include "trace_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128 /* deeper pushes are counted, not kept */

typedef struct node {
    uint32_t id, parent;
    char *domain; /* NULL: the default domain */
    char *name;
    uint64_t hash;
    atomic_bool defined;
} node;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static node **nodes; /* by id; [0] unused */
static size_t nnodes, cap_nodes;
static uint32_t *table; /* open addressing: ids */
static size_t cap_table;

/* The thread's stack, allocated at its first push: the shim's thread-local
 * storage must stay small (a library loaded by dlopen gets little static
 * TLS), and most threads never annotate. Threads are not told apart
 * further: a thread's stack is freed with it. */
typedef struct thread_stack {
    int depth; /* pushes minus pops, may exceed MAX_DEPTH */
    node *entry[MAX_DEPTH];
} thread_stack;

static FS_TLS thread_stack *stack_of_thread;
static pthread_key_t stack_key;
static pthread_once_t stack_key_once = PTHREAD_ONCE_INIT;

static void make_stack_key(void)
{
    pthread_key_create(&stack_key, free);
}

/* The calling thread's stack; made when `create`, else NULL if none. */
static thread_stack *my_stack(bool create)
{
    thread_stack *st = stack_of_thread;
    if (st || !create) return st;
    st = calloc(1, sizeof *st);
    if (!st) return NULL;
    pthread_once(&stack_key_once, make_stack_key);
    pthread_setspecific(stack_key, st);
    stack_of_thread = st;
    return st;
}

static uint64_t hash_of(uint32_t parent, const char *domain, const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ parent;
    for (const char *p = domain; p && *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)name[i]) * 1099511628211ull;
    return h;
}

static bool same_domain(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool grow(void)
{
    size_t ncap = cap_table ? cap_table * 2 : 256;
    uint32_t *t = calloc(ncap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < cap_table; i++) {
        if (!table[i]) continue;
        size_t j = nodes[table[i]]->hash & (ncap - 1);
        while (t[j])
            j = (j + 1) & (ncap - 1);
        t[j] = table[i];
    }
    free(table);
    table = t;
    cap_table = ncap;
    return true;
}

/* The node (parent, domain, name), made on first sight. */
static node *intern(uint32_t parent, const char *domain, const char *name, size_t len)
{
    uint64_t h = hash_of(parent, domain, name, len);
    node *n = NULL;

    pthread_mutex_lock(&lock);
    if ((nnodes + 2) * 2 > cap_table && !grow()) goto out;
    size_t i = h & (cap_table - 1);
    for (; table[i]; i = (i + 1) & (cap_table - 1)) {
        node *c = nodes[table[i]];
        if (c->hash == h && c->parent == parent && same_domain(c->domain, domain) &&
            !strncmp(c->name, name, len) && !c->name[len]) {
            n = c;
            goto out;
        }
    }
    if (nnodes + 2 > cap_nodes) {
        size_t ncap = cap_nodes ? cap_nodes * 2 : 256;
        node **p = realloc(nodes, ncap * sizeof *p);
        if (!p) goto out;
        nodes = p;
        cap_nodes = ncap;
    }
    n = calloc(1, sizeof *n);
    if (!n) goto out;
    n->name = strndup(name, len);
    n->domain = domain ? strdup(domain) : NULL;
    if (!n->name || (domain && !n->domain)) {
        free(n->name);
        free(n->domain);
        free(n);
        n = NULL;
        goto out;
    }
    n->id = (uint32_t)++nnodes;
    n->parent = parent;
    n->hash = h;
    nodes[n->id] = n;
    table[i] = n->id;
out:
    pthread_mutex_unlock(&lock);
    return n;
}

/* Defines node n and its ancestors in the trace, parents first. */
static void define(node *n)
{
    uint8_t rec[64];
    node *chain[MAX_DEPTH];
    int k = 0;

    pthread_mutex_lock(&lock);
    for (node *c = n; c && !atomic_load(&c->defined) && k < MAX_DEPTH;
         c = c->parent ? nodes[c->parent] : NULL)
        chain[k++] = c;
    pthread_mutex_unlock(&lock);
    while (k--) {
        node *c = chain[k];
        uint32_t domain = c->domain ? fs_trace_string(c->domain, strlen(c->domain)) : 0;
        uint32_t name = fs_trace_string(c->name, strlen(c->name));
        bool expected = false;
        /* two threads may race to define it: one record is enough */
        if (atomic_compare_exchange_strong(&c->defined, &expected, true))
            fs_trace_define(rec, fs_fmt_put_annot(c->id, c->parent, domain, name, rec));
    }
}

static node *top(const thread_stack *st)
{
    int d = !st ? 0 : st->depth < MAX_DEPTH ? st->depth : MAX_DEPTH;
    return d > 0 ? st->entry[d - 1] : NULL;
}

uint32_t fs_annot_current(void)
{
    node *n = top(stack_of_thread);
    if (!n || !fs_trace_level()) return 0;
    if (fs_unlikely(!atomic_load_explicit(&n->defined, memory_order_acquire))) define(n);
    return n->id;
}

static void emit(uint8_t kind, const char *name, size_t len)
{
    fs_fmt_event ev = {.kind = kind, .device = -1};
    if (!fs_trace_level()) return;
    ev.annot = fs_annot_current();
    ev.name = fs_trace_string(name, len);
    fs_trace_event(&ev);
}

int fs_annot_push(const char *domain, const char *name, size_t len)
{
    thread_stack *st = my_stack(true);
    if (!st) return -1;
    if (st->depth < MAX_DEPTH) {
        node *parent = top(st);
        node *n = intern(parent ? parent->id : 0, domain, name, len);
        if (!n) return -1; /* out of memory: the push is not recorded */
        st->entry[st->depth] = n;
    }
    st->depth++;
    emit(FS_REC_ANNOT_PUSH, name, len);
    return st->depth;
}

int fs_annot_pop(const char *domain)
{
    thread_stack *st = my_stack(false);
    int kept, at = -1;
    char name[256] = "";

    if (!st || st->depth <= 0) return -1;
    if (st->depth > MAX_DEPTH) { /* the innermost was never kept */
        st->depth--;
        emit(FS_REC_ANNOT_POP, "", 0);
        return st->depth;
    }
    kept = st->depth;
    for (int i = kept - 1; i >= 0 && at < 0; i--)
        if (same_domain(st->entry[i]->domain, domain)) at = i;
    if (at < 0) return -1;
    snprintf(name, sizeof name, "%s", st->entry[at]->name);
    /* the ranges above it stay, under its parent */
    for (int i = at; i + 1 < kept; i++) {
        node *above = st->entry[i + 1];
        node *parent = i > 0 ? st->entry[i - 1] : NULL;
        node *n = intern(parent ? parent->id : 0, above->domain, above->name, strlen(above->name));
        st->entry[i] = n ? n : above;
    }
    st->depth--;
    emit(FS_REC_ANNOT_POP, name, strlen(name));
    return st->depth;
}

void fs_annot_mark(const char *domain, const char *message, size_t len)
{
    (void)domain;
    emit(FS_REC_ANNOT_MARK, message, len);
}
