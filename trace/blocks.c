/* blocks.c - which stacks allocated each live block (snapshot.h), so that a
 * snapshot can say where its blocks came from, and the live statistics page
 * which sites hold the most bytes now. Set on every allocation and
 * cleared on every free while stacks are traced: a hash table in STRIPES
 * parts, each under its own lock, with chained entries recycled through a
 * free list, so the hot path takes one uncontended lock and allocates
 * nothing once warm. Memory is proportional to the live blocks. */
#include "snapshot.h"
#include "trace_internal.h"

#include <stdlib.h>

#define STRIPES 64
#define BUCKETS 1024 /* per stripe */

typedef struct entry {
    struct entry *next;
    uint64_t addr, size;
    uint32_t stack, pystack;
} entry;

static struct stripe {
    pthread_mutex_t lock;
    entry *bucket[BUCKETS];
    entry *spare;
} stripes[STRIPES];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void init(void)
{
    for (int i = 0; i < STRIPES; i++)
        pthread_mutex_init(&stripes[i].lock, NULL);
}

/* Blocks are at least 512-byte aligned: the low bits say nothing. */
static struct stripe *stripe_of(uint64_t addr, entry ***head)
{
    uint64_t h = (addr >> 9) * 0x9e3779b97f4a7c15ull;
    struct stripe *s = &stripes[h >> 58];
    *head = &s->bucket[(h >> 32) % BUCKETS];
    return s;
}

void fs_blocks_set(uint64_t addr, uint64_t size, uint32_t stack, uint32_t pystack)
{
    entry **head, *e;
    pthread_once(&once, init);
    struct stripe *s = stripe_of(addr, &head);
    pthread_mutex_lock(&s->lock);
    for (e = *head; e && e->addr != addr; e = e->next)
        ;
    if (!e) {
        e = s->spare;
        if (e)
            s->spare = e->next;
        else
            e = malloc(sizeof *e);
        if (e) {
            e->addr = addr;
            e->next = *head;
            *head = e;
        }
    }
    if (e) {
        e->size = size;
        e->stack = stack;
        e->pystack = pystack;
    }
    pthread_mutex_unlock(&s->lock);
}

void fs_blocks_clear(uint64_t addr)
{
    entry **head;
    pthread_once(&once, init);
    struct stripe *s = stripe_of(addr, &head);
    pthread_mutex_lock(&s->lock);
    for (entry **p = head; *p; p = &(*p)->next) {
        if ((*p)->addr != addr) continue;
        entry *e = *p;
        *p = e->next;
        e->next = s->spare;
        s->spare = e;
        break;
    }
    pthread_mutex_unlock(&s->lock);
}

bool fs_blocks_get(uint64_t addr, uint32_t *stack, uint32_t *pystack)
{
    entry **head, *e;
    pthread_once(&once, init);
    struct stripe *s = stripe_of(addr, &head);
    pthread_mutex_lock(&s->lock);
    for (e = *head; e && e->addr != addr; e = e->next)
        ;
    if (e) {
        *stack = e->stack;
        *pystack = e->pystack;
    }
    pthread_mutex_unlock(&s->lock);
    return e != NULL;
}

/* Buckets visited per hold of a stripe's lock: an allocation that meets the
 * walk waits for a few dozen entries at most. */
#define EACH_CHUNK 64

void fs_blocks_each(void (*fn)(void *ctx, uint32_t stack, uint32_t pystack, uint64_t size),
                    void *ctx)
{
    pthread_once(&once, init);
    for (int i = 0; i < STRIPES; i++) {
        struct stripe *s = &stripes[i];
        for (int b = 0; b < BUCKETS; b += EACH_CHUNK) {
            pthread_mutex_lock(&s->lock);
            for (int k = b; k < b + EACH_CHUNK; k++)
                for (entry *e = s->bucket[k]; e; e = e->next)
                    fn(ctx, e->stack, e->pystack, e->size);
            pthread_mutex_unlock(&s->lock);
        }
    }
}

void fs_blocks_after_fork(void)
{
    for (int i = 0; i < STRIPES; i++) {
        struct stripe *s = &stripes[i];
        pthread_mutex_init(&s->lock, NULL);
        for (int b = 0; b < BUCKETS; b++) {
            while (s->bucket[b]) {
                entry *e = s->bucket[b];
                s->bucket[b] = e->next;
                e->next = s->spare;
                s->spare = e;
            }
        }
    }
}
