/* stats.c - the statistics PyTorch users know ({current, peak, allocated,
 * freed} per pool kind), kept so that threads allocating on distinct
 * streams share no cache line while the device stays below its peaks.
 *
 * What blocks change (allocation, allocated, requested, active and
 * inactive-split counts and bytes, pending frees) is kept per pool, under
 * the pool's lock, which every such change holds anyway: the cached hot
 * path writes no statistic of the device's. Readers sum the pools. What
 * segments change (segment, reserved_bytes) and the event counters stay
 * per device under stats_lock: only misses and releases move them.
 *
 * Peaks. A sum of the pools' peaks is not the device's peak, and peaks are
 * exact (SPEC section 4). So each of a pool's 21 counters (seven fields,
 * for the small, large and all pools) has a room, its share of the
 * device's peak: the peak is never below the sum of every pool's room plus
 * the room no pool holds (free_room). While every pool stays within its
 * rooms, the device's sum is within its peak and nobody need look. A rise
 * past a pool's room is noted (the value before it, the most it reaches)
 * and settled when the pool's critical section ends (fs_cache_unlock):
 *   1. with more room from free_room, under room_lock: one short lock on a
 *      line of the device's, paid only by a change beyond the margin a pool
 *      keeps above its values (a share of what the device has left). A
 *      pool whose values fell well below its room (watched on active bytes,
 *      which every free moves) gives the excess back the same way. When
 *      free_room falls short, the room other pools hold unused is taken
 *      from those whose lock is free (a trylock: a word of theirs to write,
 *      not the device's);
 *   2. when that cannot cover it either, the sum may really have passed
 *      the peak: under peak_lock every pool is held still (its lock taken
 *      by trying, or parked: waiting to settle itself, its section done),
 *      the peak is computed exactly and the room dealt out anew.
 *
 * Why the peaks are exact. Until it ends, a pool's critical section is
 * seen by nobody (its lock is held, and it gives none of a counter's room
 * back while that counter is past room), so its changes of the counter
 * from the rise past room on may be ordered where it settles, the pool
 * counting meanwhile at the value before that rise, which was within its
 * room. In that order the sum stays within the peak except inside settled
 * changes: in 1 the room taken covers the most the pool reached (room
 * moves only between a pool and free_room, or another pool's unused part
 * while that pool is between sections, so the invariant holds throughout);
 * in 2 every other pool is still, and the parked pools' changes are placed
 * one after another (each one's most with those before it done and those
 * after it not begun), which is exactly the sum's greatest value in that
 * order. So each peak is the greatest sum in an order of the pools'
 * critical sections that their locks allow, and never below the current
 * value (a reader holds every pool still and settles the parked ones
 * first).
 *
 * Why settling cannot deadlock. A pool lock's holder waits only for leaf
 * locks, or for peak_lock in step 2 after parking; whoever holds a pool
 * lock and wants another's (step 1 taking unused room, peak_lock's holder)
 * only tries it, and peak_lock's holder counts a parked pool as held. */
#include "internal.h"

#include <assert.h>
#include <sched.h>
#include <string.h>

#define NF        FS_ST_POOL_FIELDS
#define NCOUNTERS (FS_SIZE_CLASSES * NF)

/* The device's own counters, read without a lock by observers. */
static inline int64_t get(const _Atomic int64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static inline void set(_Atomic int64_t *v, int64_t x)
{
    atomic_store_explicit(v, x, memory_order_relaxed);
}

/* A pool's current value of field f: allocated bytes through relaxed
 * atomic accesses (fs_stats_totals reads it without the pool's lock), the
 * others plain; f is a constant wherever it matters. */
static inline int64_t cur_get(const int64_t *cur, int f)
{
    if (f == FS_ST_ALLOCATED_BYTES) return __atomic_load_n(&cur[f], __ATOMIC_RELAXED);
    return cur[f];
}

static inline void cur_set(int64_t *cur, int f, int64_t x)
{
    if (f == FS_ST_ALLOCATED_BYTES)
        __atomic_store_n(&cur[f], x, __ATOMIC_RELAXED);
    else
        cur[f] = x;
}

/* A pool counter's value: one kind's (slot FS_SIZE_SMALL, _LARGE), or
 * both (FS_SIZE_ALL); and its room and low mark. */
static inline int64_t value(const fs_cache_stats *s, int slot, int f)
{
    if (slot == FS_SIZE_ALL) return cur_get(s->row[0].cur, f) + cur_get(s->row[1].cur, f);
    return cur_get(s->row[slot - 1].cur, f);
}

static inline int64_t *room_of(fs_cache_stats *s, int slot)
{
    return slot == FS_SIZE_ALL ? s->room_all : s->row[slot - 1].room;
}

static inline int64_t *low_of(fs_cache_stats *s, int slot)
{
    return slot == FS_SIZE_ALL ? s->low_all : s->row[slot - 1].low;
}

/* ---- the pool's side: the hot path ----------------------------------------- */

/* Counter (slot, f) has risen by v to x, past its room: settled when the
 * section ends. */
__attribute__((noinline, cold)) static void past_room(fs_cache_stats *s, int slot, int f, int64_t x,
                                                      int64_t v)
{
    uint32_t bit = 1u << (slot * NF + f);
    if (!(s->over & bit)) {
        s->over |= bit;
        s->before[slot][f] = x - v;
        s->high[slot][f] = x;
    } else if (x > s->high[slot][f]) {
        s->high[slot][f] = x;
    }
}

static inline void rise(fs_cache_stats *s, int k, int f, int64_t v)
{
    fs_stat_row *r = &s->row[k];
    int64_t c = cur_get(r->cur, f) + v;
    cur_set(r->cur, f, c);
    r->total[f] += v;
    if (c > r->room[f]) past_room(s, k + 1, f, c, v);
    int64_t all = c + cur_get(s->row[1 - k].cur, f);
    if (all > s->room_all[f]) past_room(s, FS_SIZE_ALL, f, all, v);
}

static inline void fall(fs_cache_stats *s, int k, int f, int64_t v)
{
    fs_stat_row *r = &s->row[k];
    int64_t c = cur_get(r->cur, f) - v;
    cur_set(r->cur, f, c);
    if (c < r->low[f]) s->give |= 1u << ((k + 1) * NF + f);
    if (c + cur_get(s->row[1 - k].cur, f) < s->low_all[f]) s->give |= 1u << (FS_SIZE_ALL * NF + f);
}

static inline void bump(fs_cache_stats *s, int k, int f, int64_t v)
{
    if (v > 0)
        rise(s, k, f, v);
    else if (v < 0)
        fall(s, k, f, -v);
}

/* One of PyTorch's figures without pool kinds, under stats_lock. */
static void oversize_bump(fs_stat *st, int64_t by)
{
    st->current += by;
    if (by > 0) {
        st->allocated += by;
        if (st->current > st->peak) st->peak = st->current;
    } else {
        st->freed -= by;
    }
}

/* The device's own fields: exact peaks under stats_lock, as ever. */
static void dev_bump(fs_dev *d, int k, int f, int64_t v)
{
    fs_dev_stats *s = &d->st;
    f -= FS_ST_POOL_FIELDS;
    int64_t c = get(&s->cur[k][f]) + v;
    set(&s->cur[k][f], c);
    if (v <= 0) return;
    s->total[k][f] += v;
    if (c > s->peak[k + 1][f]) s->peak[k + 1][f] = c;
    c += get(&s->cur[1 - k][f]);
    if (c > s->peak[FS_SIZE_ALL][f]) s->peak[FS_SIZE_ALL][f] = c;
}

void fs_stats_apply(fs_stream_cache *p, const fs_delta *dl)
{
    fs_delta v = *dl; /* a copy: the stores below cannot alias it */
    fs_cache_stats *s = &p->st;
    int k = v.kind;
    bump(s, k, FS_ST_ALLOCATION, v.allocation);
    bump(s, k, FS_ST_ALLOCATED_BYTES, v.allocated_bytes);
    bump(s, k, FS_ST_REQUESTED_BYTES, v.requested_bytes);
    bump(s, k, FS_ST_ACTIVE, v.active);
    bump(s, k, FS_ST_ACTIVE_BYTES, v.active_bytes);
    bump(s, k, FS_ST_INACTIVE_SPLIT, v.inactive_split);
    bump(s, k, FS_ST_INACTIVE_SPLIT_BYTES, v.inactive_split_bytes);
    s->pending_frees += v.pending;
    s->pending_free_bytes += v.pending_bytes;
    if (v.segment || v.reserved_bytes || v.oversize || v.oversize_segments) {
        fs_dev *d = p->dev;
        fs_spin_lock(&d->stats_lock);
        dev_bump(d, k, FS_ST_SEGMENT, v.segment);
        dev_bump(d, k, FS_ST_RESERVED_BYTES, v.reserved_bytes);
        oversize_bump(&d->st.oversize_allocations, v.oversize);
        oversize_bump(&d->st.oversize_segments, v.oversize_segments);
        fs_spin_unlock(&d->stats_lock);
    }
}

/* An oversize block handed out or put back on the hot path: rare (only
 * with max_split_size set, for blocks at least that large). */
__attribute__((noinline, cold)) static void oversize_count(fs_dev *d, int32_t by)
{
    fs_spin_lock(&d->stats_lock);
    oversize_bump(&d->st.oversize_allocations, by);
    fs_spin_unlock(&d->stats_lock);
}

/* The two changes of a cached alloc+free pair: the five fields that always
 * move go one way only, so neither tests signs. */
static void assert_handout(const fs_delta *dl, int sign)
{
    (void)dl;
    (void)sign;
    assert(sign * dl->allocation == 1 && sign * dl->active == 1 && sign * dl->oversize >= 0);
    assert(sign * dl->allocated_bytes > 0 && sign * dl->active_bytes > 0);
    assert(!dl->segment && !dl->reserved_bytes && !dl->pending && !dl->pending_bytes);
}

/* The pair's rises and falls, lean: a rise past a room only sets *past,
 * which one call then sorts out; only active bytes, which every block's
 * free moves, are watched for room to give back, and then every counter's
 * room is dealt anew (fs_stats_settle). */
static inline void rise_quiet(fs_stat_row *r, const fs_stat_row *o, const int64_t *room_all, int f,
                              int64_t v, bool *past)
{
    int64_t c = cur_get(r->cur, f) + v;
    cur_set(r->cur, f, c);
    r->total[f] += v;
    if (__builtin_expect(c > r->room[f], 0)) *past = true;
    if (__builtin_expect(c + cur_get(o->cur, f) > room_all[f], 0)) *past = true;
}

static inline void fall_quiet(fs_stat_row *r, int f, int64_t v)
{
    cur_set(r->cur, f, cur_get(r->cur, f) - v);
}

static inline void bump_quiet(fs_stat_row *r, const fs_stat_row *o, const int64_t *room_all, int f,
                              int64_t v, bool *past)
{
    if (v > 0)
        rise_quiet(r, o, room_all, f, v, past);
    else
        fall_quiet(r, f, -v);
}

#define FS_ALL_COUNTERS ((1u << NCOUNTERS) - 1)

/* After rises by `by` (per field) that passed some room: which counters,
 * and from what. */
__attribute__((noinline, cold)) static void note_past(fs_cache_stats *s, int k,
                                                      const int64_t by[NF])
{
    for (int f = 0; f < NF; f++) {
        if (by[f] <= 0) continue;
        int64_t c = value(s, k + 1, f), all = value(s, FS_SIZE_ALL, f);
        if (c > s->row[k].room[f]) past_room(s, k + 1, f, c, by[f]);
        if (all > s->room_all[f]) past_room(s, FS_SIZE_ALL, f, all, by[f]);
    }
}

/* The fields of a delta as scalars, read before any store: the counters'
 * stores are atomic, and the compiler would otherwise copy the delta. */
#define DELTA_FIELDS(dl)                                                                           \
    const int k = (dl)->kind;                                                                      \
    const int64_t allocated = (dl)->allocated_bytes, requested = (dl)->requested_bytes,            \
                  active_bytes = (dl)->active_bytes, split = (dl)->inactive_split,                 \
                  split_bytes = (dl)->inactive_split_bytes

void fs_stats_handout(fs_stream_cache *p, const fs_delta *dl)
{
    assert_handout(dl, 1);
    DELTA_FIELDS(dl);
    fs_cache_stats *s = &p->st;
    fs_stat_row *r = &s->row[k];
    const fs_stat_row *o = &s->row[1 - k];
    bool past = false;
    rise_quiet(r, o, s->room_all, FS_ST_ALLOCATION, 1, &past);
    rise_quiet(r, o, s->room_all, FS_ST_ALLOCATED_BYTES, allocated, &past);
    rise_quiet(r, o, s->room_all, FS_ST_REQUESTED_BYTES, requested, &past);
    rise_quiet(r, o, s->room_all, FS_ST_ACTIVE, 1, &past);
    rise_quiet(r, o, s->room_all, FS_ST_ACTIVE_BYTES, active_bytes, &past);
    bump_quiet(r, o, s->room_all, FS_ST_INACTIVE_SPLIT, split, &past);
    bump_quiet(r, o, s->room_all, FS_ST_INACTIVE_SPLIT_BYTES, split_bytes, &past);
    if (__builtin_expect(past, 0)) {
        const int64_t by[NF] = {1, allocated, requested, 1, active_bytes, split, split_bytes};
        note_past(s, k, by);
    }
    if (__builtin_expect(dl->oversize != 0, 0)) oversize_count(p->dev, dl->oversize);
}

void fs_stats_putback(fs_stream_cache *p, const fs_delta *dl)
{
    assert_handout(dl, -1);
    DELTA_FIELDS(dl);
    fs_cache_stats *s = &p->st;
    fs_stat_row *r = &s->row[k];
    const fs_stat_row *o = &s->row[1 - k];
    bool past = false;
    fall_quiet(r, FS_ST_ALLOCATION, 1);
    fall_quiet(r, FS_ST_ALLOCATED_BYTES, -allocated);
    fall_quiet(r, FS_ST_REQUESTED_BYTES, -requested);
    fall_quiet(r, FS_ST_ACTIVE, 1);
    int64_t c = cur_get(r->cur, FS_ST_ACTIVE_BYTES) + active_bytes;
    cur_set(r->cur, FS_ST_ACTIVE_BYTES, c);
    if (__builtin_expect(c < r->low[FS_ST_ACTIVE_BYTES], 0)) s->give = FS_ALL_COUNTERS;
    if (__builtin_expect(c + cur_get(o->cur, FS_ST_ACTIVE_BYTES) < s->low_all[FS_ST_ACTIVE_BYTES],
                         0))
        s->give = FS_ALL_COUNTERS;
    bump_quiet(r, o, s->room_all, FS_ST_INACTIVE_SPLIT, split, &past);
    bump_quiet(r, o, s->room_all, FS_ST_INACTIVE_SPLIT_BYTES, split_bytes, &past);
    if (__builtin_expect(past, 0)) {
        const int64_t by[NF] = {0, 0, 0, 0, 0, split, split_bytes};
        note_past(s, k, by);
    }
    if (__builtin_expect(dl->oversize != 0, 0)) oversize_count(p->dev, dl->oversize);
}

void fs_stats_count(fs_dev *d, int64_t *field, int64_t by)
{
    fs_spin_lock(&d->stats_lock);
    *field += by;
    fs_spin_unlock(&d->stats_lock);
}

/* ---- settling ------------------------------------------------------------------- */

/* The margin a pool keeps above a counter's value after settling: an
 * n-th of what the device has left above the sum. What the other pools
 * then hold unused, a pool that rises further takes from them (keeping
 * half of it free with the device instead gave a pool half the margin, and
 * eight threads' FSDP churn settled with the device about twice as often). */
static inline int64_t margin(int64_t spare, int n)
{
    return spare > 0 ? spare / (n > 0 ? n : 1) : 0;
}

/* How far below its value after settling a counter may fall before the
 * pool gives room back: twice its margin, and never less than a few
 * blocks' worth, or a pool near the device's peak (margin 0) would trade
 * one unit back and forth with the device on every pair. */
static inline int64_t slack(int f, int64_t m)
{
    bool bytes = f == FS_ST_ALLOCATED_BYTES || f == FS_ST_REQUESTED_BYTES ||
                 f == FS_ST_ACTIVE_BYTES || f == FS_ST_INACTIVE_SPLIT_BYTES;
    return 2 * m + (bytes ? (int64_t)(4 * FS_MiB) : 8);
}

/* Gives pool s of n the room `need` plus a margin out of `spare`, the rest
 * of what the device has free for the counter (including the pool's old
 * room); returns what stays free. */
static inline int64_t deal(fs_cache_stats *s, int slot, int f, int64_t need, int64_t spare, int n)
{
    int64_t m = margin(spare, n);
    room_of(s, slot)[f] = need + m;
    low_of(s, slot)[f] = value(s, slot, f) - slack(f, m);
    return spare - m;
}

/* A pool with blocks handed out or pending, or settling: one that deals
 * in blocks now, and gets a margin when room is dealt out. */
static inline bool at_work(const fs_cache_stats *s)
{
    return s->over || value(s, FS_SIZE_ALL, FS_ST_ACTIVE) > 0;
}

/* Every pool of d but `self` held still: its lock taken by trying, or
 * parked. peak_lock held; the pools then stay still until resume(). */
static void stop(fs_dev *d, fs_stream_cache *self)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *q = d->pools[i];
        if (q == self) continue;
        for (int spins = 0;; spins++) {
            if (fs_spin_trylock(&q->lock)) {
                q->st.stopped = true;
                break;
            }
            if (atomic_load_explicit(&q->st.parked, memory_order_acquire)) break;
            if (spins < 64)
                fs_cpu_relax();
            else
                sched_yield(); /* its holder may be off the CPU */
        }
    }
}

static void resume(fs_dev *d, fs_stream_cache *self)
{
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *q = d->pools[i];
        if (q == self || !q->st.stopped) continue;
        q->st.stopped = false;
        fs_spin_unlock(&q->lock); /* between sections: nothing to settle */
    }
}

/* Step 2 for every counter some pool rose past its room, with every pool
 * still (peak_lock held): the peak in the order the file's comment gives
 * (pools in their index order), and the room dealt out anew. */
static void settle_stopped(fs_dev *d)
{
    uint32_t over = 0;
    int active = 0;
    for (int i = 0; i < d->npools; i++) {
        over |= d->pools[i]->st.over;
        active += at_work(&d->pools[i]->st);
    }
    if (!over) return;
    fs_spin_lock(&d->room_lock);
    for (; over; over &= over - 1) {
        int bit = __builtin_ctz(over), slot = bit / NF, f = bit % NF;
        int64_t sum = 0;
        for (int i = 0; i < d->npools; i++) {
            fs_cache_stats *s = &d->pools[i]->st;
            sum += ((s->over >> bit) & 1) ? s->before[slot][f] : value(s, slot, f);
        }
        int64_t peak = d->peak[slot][f];
        for (int i = 0; i < d->npools; i++) {
            fs_cache_stats *s = &d->pools[i]->st;
            if (!((s->over >> bit) & 1)) continue;
            int64_t most = sum - s->before[slot][f] + s->high[slot][f];
            if (most > peak) peak = most;
            sum += value(s, slot, f) - s->before[slot][f];
        }
        assert(peak >= sum);
        d->peak[slot][f] = peak;
        /* a margin for each pool at work; an idle one gets none, or a
         * lone thread among many streams would hold an n-th of the room */
        int64_t m = margin(peak - sum, active), dealt = 0;
        for (int i = 0; i < d->npools; i++) {
            fs_cache_stats *s = &d->pools[i]->st;
            int64_t v = value(s, slot, f), mi = at_work(s) ? m : 0;
            room_of(s, slot)[f] = v + mi;
            low_of(s, slot)[f] = v - slack(f, mi);
            dealt += v + mi;
        }
        d->free_room[slot][f] = peak - dealt;
    }
    fs_spin_unlock(&d->room_lock);
    atomic_store_explicit(&d->pools_at_work, active, memory_order_relaxed);
    for (int i = 0; i < d->npools; i++)
        d->pools[i]->st.over = d->pools[i]->st.give = d->pools[i]->st.took = 0;
}

/* Step 2 for pool self, whose critical section is done: parks, and once
 * peak_lock is its own settles, unless a reader or another pool's settling
 * did it meanwhile. */
__attribute__((noinline, cold)) static void settle_all(fs_stream_cache *self)
{
    fs_dev *d = self->dev;
    atomic_store_explicit(&self->st.parked, true, memory_order_release);
    fs_spin_lock(&d->peak_lock);
    atomic_store_explicit(&self->st.parked, false, memory_order_relaxed);
    if (self->st.over) {
        stop(d, self);
        settle_stopped(d);
        resume(d, self);
    }
    fs_spin_unlock(&d->peak_lock);
}

/* Step 1, second half: room that other pools hold beyond their values,
 * taken from those whose lock is free (a pool between two critical
 * sections), one after another, until p's counters past room are covered.
 * The device's free room runs out when the sum sits near its peak while
 * the pools take turns at their highs (n pools each holding one block more
 * every other moment need n blocks of room, while the sum's peak holds
 * about n/2 more): the pools low at that moment have the room the others
 * need, and a trylock is a word of theirs to write, not the device's. */
static void take_unused(fs_stream_cache *p)
{
    fs_cache_stats *s = &p->st;
    fs_cache_view *v = atomic_load_explicit(&p->dev->view, memory_order_acquire);
    int n = v ? v->n : 0, i = s->victim;
    /* Not twice running for a counter: pools trading a unit to and fro
     * while the sum's peak lies below their highs together never learn
     * whether they reached them at once, which only step 2 can tell. */
    uint32_t want = s->over & ~s->took, before = s->over;
    for (int tried = 0; tried < n && (s->over & want); tried++, i++) {
        fs_stream_cache *q = v->pools[i %= n];
        if (q == p || !fs_spin_trylock(&q->lock)) continue;
        fs_cache_stats *o = &q->st; /* between sections: every counter within room */
        for (uint32_t todo = s->over & want; todo; todo &= todo - 1) {
            int bit = __builtin_ctz(todo), slot = bit / NF, f = bit % NF;
            int64_t c = value(s, slot, f), need = s->high[slot][f] > c ? s->high[slot][f] : c;
            int64_t *room = &room_of(s, slot)[f], *spare = &room_of(o, slot)[f];
            int64_t t = *spare - value(o, slot, f);
            if (t > need - *room) t = need - *room;
            if (t <= 0) continue;
            *spare -= t;
            *room += t;
            if (*room < need) continue;
            low_of(s, slot)[f] = c - slack(f, 0);
            s->over &= ~(1u << bit);
        }
        fs_spin_unlock(&q->lock);
    }
    s->victim = i;
    s->took = before & ~s->over;
}

/* Step 1, at the end of a critical section on p with counters past room
 * (over) or well below it (give). */
void fs_stats_settle(fs_stream_cache *p)
{
    fs_dev *d = p->dev;
    fs_cache_stats *s = &p->st;
    /* the margin's share: the pools at work when room was last dealt */
    int n = atomic_load_explicit(&d->pools_at_work, memory_order_relaxed);
    uint32_t todo = s->over | s->give;
    fs_spin_lock(&d->room_lock);
    for (; todo; todo &= todo - 1) {
        int bit = __builtin_ctz(todo), slot = bit / NF, f = bit % NF;
        int64_t need = value(s, slot, f);
        if (((s->over >> bit) & 1) && s->high[slot][f] > need) need = s->high[slot][f];
        int64_t have = d->free_room[slot][f] + room_of(s, slot)[f];
        if (have < need) continue; /* step 2 */
        if (!((s->over >> bit) & 1)) {
            /* giving back: only what is more than the slack (what every
             * counter of a pool gets dealt anew when its active bytes fell)
             * lest a count at its high trade a unit back and forth */
            int64_t keep = slack(f, margin(have - need, n));
            if (room_of(s, slot)[f] - need <= keep) {
                low_of(s, slot)[f] = room_of(s, slot)[f] - keep;
                continue;
            }
        }
        d->free_room[slot][f] = deal(s, slot, f, need, have - need, n);
        s->over &= ~(1u << bit);
        s->took &= ~(1u << bit);
    }
    fs_spin_unlock(&d->room_lock);
    s->give = 0;
    if (s->over) take_unused(p);
    if (s->over) settle_all(p);
}

/* ---- reading ---------------------------------------------------------------------- */

void fs_stats_stop(fs_dev *d)
{
    fs_spin_lock(&d->peak_lock);
    stop(d, NULL);
    settle_stopped(d); /* the parked pools' changes, before anyone reads */
}

void fs_stats_resume(fs_dev *d)
{
    resume(d, NULL);
    fs_spin_unlock(&d->peak_lock);
}

/* One field of the public form from per-kind current and total values and
 * the three peaks. */
static void export_field(const int64_t cur[FS_KINDS], const int64_t total[FS_KINDS],
                         const int64_t peak[FS_SIZE_CLASSES], const fs_dev_stats *s, int f,
                         fs_stat out[FS_SIZE_CLASSES])
{
    memset(out, 0, FS_SIZE_CLASSES * sizeof *out);
    for (int k = 0; k < FS_KINDS; k++) {
        fs_stat *o = &out[k + 1];
        o->current = cur[k];
        /* since the last reset_accumulated: what rose, and what fell */
        o->allocated = total[k] - s->acc_total[k][f];
        o->freed = o->allocated - (o->current - s->acc_cur[k][f]);
        o->peak = peak[k + 1];
        out[FS_SIZE_ALL].current += o->current;
        out[FS_SIZE_ALL].allocated += o->allocated;
        out[FS_SIZE_ALL].freed += o->freed;
    }
    out[FS_SIZE_ALL].peak = peak[FS_SIZE_ALL];
}

static fs_stat *public_field(fs_alloc_stats *out, int f)
{
    switch (f) {
    case FS_ST_ALLOCATION:
        return out->allocation;
    case FS_ST_ALLOCATED_BYTES:
        return out->allocated_bytes;
    case FS_ST_REQUESTED_BYTES:
        return out->requested_bytes;
    case FS_ST_ACTIVE:
        return out->active;
    case FS_ST_ACTIVE_BYTES:
        return out->active_bytes;
    case FS_ST_INACTIVE_SPLIT:
        return out->inactive_split;
    case FS_ST_INACTIVE_SPLIT_BYTES:
        return out->inactive_split_bytes;
    case FS_ST_SEGMENT:
        return out->segment;
    default:
        return out->reserved_bytes;
    }
}

void fs_stats_read_stopped(fs_dev *d, fs_alloc_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int f = 0; f < NF; f++) {
        int64_t cur[FS_KINDS] = {0}, total[FS_KINDS] = {0}, peak[FS_SIZE_CLASSES];
        for (int k = 0; k < FS_KINDS; k++) {
            total[k] = d->gone_total[k][f];
            for (int i = 0; i < d->npools; i++) {
                cur[k] += cur_get(d->pools[i]->st.row[k].cur, f);
                total[k] += d->pools[i]->st.row[k].total[f];
            }
        }
        for (int slot = 0; slot < FS_SIZE_CLASSES; slot++)
            peak[slot] = d->peak[slot][f];
        export_field(cur, total, peak, &d->st, f, public_field(out, f));
    }
    for (int i = 0; i < d->npools; i++) {
        out->pending_frees += d->pools[i]->st.pending_frees;
        out->pending_free_bytes += d->pools[i]->st.pending_free_bytes;
    }
    fs_spin_lock(&d->stats_lock);
    const fs_dev_stats *s = &d->st;
    for (int f = 0; f < FS_ST_DEV_FIELDS; f++) {
        int64_t cur[FS_KINDS], total[FS_KINDS], peak[FS_SIZE_CLASSES];
        for (int k = 0; k < FS_KINDS; k++) {
            cur[k] = get(&s->cur[k][f]);
            total[k] = s->total[k][f];
        }
        for (int slot = 0; slot < FS_SIZE_CLASSES; slot++)
            peak[slot] = s->peak[slot][f];
        export_field(cur, total, peak, s, FS_ST_POOL_FIELDS + f,
                     public_field(out, FS_ST_POOL_FIELDS + f));
    }
    out->num_alloc_retries = s->num_alloc_retries;
    out->num_ooms = s->num_ooms;
    out->num_sync_all_streams = s->num_sync_all_streams;
    out->num_device_alloc = s->num_device_alloc;
    out->num_device_free = s->num_device_free;
    out->oversize_allocations = s->oversize_allocations;
    out->oversize_segments = s->oversize_segments;
    fs_spin_unlock(&d->stats_lock);
}

void fs_stats_read(fs_dev *d, fs_alloc_stats *out)
{
    fs_stats_stop(d);
    fs_stats_read_stopped(d, out);
    fs_stats_resume(d);
}

void fs_stats_totals(fs_dev *d, size_t *allocated, size_t *reserved)
{
    int64_t al = 0, re = 0;
    fs_cache_view *v = atomic_load_explicit(&d->view, memory_order_acquire);
    for (int i = 0; v && i < v->n; i++)
        al += value(&v->pools[i]->st, FS_SIZE_ALL, FS_ST_ALLOCATED_BYTES);
    for (int k = 0; k < FS_KINDS; k++)
        re += get(&d->st.cur[k][FS_ST_RESERVED_BYTES - FS_ST_POOL_FIELDS]);
    /* each pool's figure is exact; their sum, read unlocked, may mix moments */
    *allocated = al > 0 ? (size_t)al : 0;
    *reserved = re > 0 ? (size_t)re : 0;
}

size_t fs_stats_reserved(fs_dev *d)
{
    int64_t re = 0;
    fs_spin_lock(&d->stats_lock);
    for (int k = 0; k < FS_KINDS; k++)
        re += get(&d->st.cur[k][FS_ST_RESERVED_BYTES - FS_ST_POOL_FIELDS]);
    fs_spin_unlock(&d->stats_lock);
    return (size_t)re;
}

/* ---- the device's pools ------------------------------------------------------------ */

bool fs_dev_keep_dead(fs_dev *d, void *mem)
{
    if (!mem) return true;
    if (d->ndead == d->capdead) {
        int cap = d->capdead ? d->capdead * 2 : 16;
        void **n = realloc(d->dead, (size_t)cap * sizeof *n);
        if (!n) return false;
        d->dead = n;
        d->capdead = cap;
    }
    d->dead[d->ndead++] = mem;
    return true;
}

/* Publishes d->pools for fs_stats_totals; the old view lives on. */
static bool publish(fs_dev *d)
{
    fs_cache_view *v = malloc(sizeof *v + (size_t)d->npools * sizeof v->pools[0]);
    fs_cache_view *old = atomic_load_explicit(&d->view, memory_order_relaxed);
    if (!v || !fs_dev_keep_dead(d, old)) {
        free(v);
        return false;
    }
    v->n = d->npools;
    if (d->npools) memcpy(v->pools, d->pools, (size_t)d->npools * sizeof v->pools[0]);
    atomic_store_explicit(&d->view, v, memory_order_release);
    return true;
}

bool fs_stats_pool_add(fs_dev *d, fs_stream_cache *p)
{
    bool ok = true;
    /* a settler walks d->pools under peak_lock alone */
    fs_spin_lock(&d->peak_lock);
    if (d->npools == d->cappools) {
        int cap = d->cappools ? d->cappools * 2 : 8;
        fs_stream_cache **n = realloc(d->pools, (size_t)cap * sizeof *n);
        if (n) {
            d->pools = n;
            d->cappools = cap;
        }
        ok = n != NULL;
    }
    if (ok) d->pools[d->npools++] = p; /* it holds no room; every other pool's stays */
    fs_spin_unlock(&d->peak_lock);
    if (ok && !publish(d)) {
        fs_spin_lock(&d->peak_lock);
        d->npools--;
        fs_spin_unlock(&d->peak_lock);
        ok = false;
    }
    return ok;
}

void fs_stats_pools_keep(fs_dev *d, bool (*keep)(fs_stream_cache *p),
                         void (*drop)(fs_stream_cache *p))
{
    fs_stream_cache *gone = NULL;
    /* still, for settling takes room from pools found in a view */
    fs_stats_stop(d);
    fs_spin_lock(&d->room_lock);
    int kept = 0;
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (keep(p)) {
            d->pools[kept++] = p;
            continue;
        }
        /* nothing left in it; its totals stay the device's, its room is free */
        for (int f = 0; f < NF; f++) {
            for (int k = 0; k < FS_KINDS; k++) {
                assert(cur_get(p->st.row[k].cur, f) == 0);
                d->gone_total[k][f] += p->st.row[k].total[f];
            }
            for (int slot = 0; slot < FS_SIZE_CLASSES; slot++) {
                d->free_room[slot][f] += room_of(&p->st, slot)[f];
                room_of(&p->st, slot)[f] = 0; /* nobody takes it twice */
            }
        }
        if (p->st.stopped) {
            p->st.stopped = false;
            fs_spin_unlock(&p->lock);
        }
        p->hash_next = gone; /* out of the registry already */
        gone = p;
    }
    d->npools = kept;
    fs_spin_unlock(&d->room_lock);
    fs_stats_resume(d);
    publish(d); /* out of memory: the old view, naming the gone pools too, stays */
    while (gone) {
        fs_stream_cache *p = gone;
        gone = p->hash_next;
        drop(p);
        /* a reader of an old view may still look at its counters (out of
         * memory: leaked rather than freed under a reader) */
        fs_dev_keep_dead(d, p);
    }
}

/* ---- the rest of the public calls ----------------------------------------------------- */

static int64_t largest_free(fs_dev *d)
{
    size_t best = 0;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_cache_lock(p);
        for (int k = 0; k < FS_SETS; k++) {
            fs_block *m = fs_bins_max(&p->free[k]);
            if (m && m->size > best) best = m->size;
        }
        fs_cache_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
    return (int64_t)best;
}

size_t fs_stats_free_elsewhere(fs_dev *d, fs_stream_t stream)
{
    size_t bytes = 0;
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        if (p->stream == stream) continue;
        fs_cache_lock(p);
        for (int k = 0; k < FS_SETS; k++)
            bytes += p->free_bytes[k];
        fs_cache_unlock(p);
    }
    pthread_mutex_unlock(&d->lock);
    return bytes;
}

size_t fs_alloc_stream_free(fs_allocator *a, int device, fs_stream_free *out, size_t max,
                            size_t *total)
{
    size_t n = 0, kept = 0, sum = 0;

    *total = 0;
    if (device < 0 || device >= a->ndev) return 0;
    fs_dev *d = &a->devs[device];
    pthread_mutex_lock(&d->lock);
    for (int i = 0; i < d->npools; i++) {
        fs_stream_cache *p = d->pools[i];
        fs_stream_free f = {.stream = p->stream};
        fs_cache_lock(p);
        for (int k = 0; k < FS_SETS; k++)
            f.bytes += p->free_bytes[k];
        fs_cache_unlock(p);
        if (!f.bytes) continue;
        f.retired = atomic_load_explicit(&p->retired, memory_order_relaxed);
        n++;
        sum += f.bytes;
        /* insertion into the kept ones, largest first */
        size_t j = kept < max ? kept++ : max;
        while (j > 0 && out[j - 1].bytes < f.bytes) {
            if (j < max) out[j] = out[j - 1];
            j--;
        }
        if (j < max) out[j] = f;
    }
    pthread_mutex_unlock(&d->lock);
    *total = sum;
    return n;
}

static void add_stat(fs_stat *to, const fs_stat *from)
{
    to->current += from->current;
    to->peak += from->peak;
    to->allocated += from->allocated;
    to->freed += from->freed;
}

static void add_all(fs_alloc_stats *to, const fs_alloc_stats *from)
{
    for (int k = 0; k < FS_SIZE_CLASSES; k++) {
        add_stat(&to->allocation[k], &from->allocation[k]);
        add_stat(&to->segment[k], &from->segment[k]);
        add_stat(&to->active[k], &from->active[k]);
        add_stat(&to->inactive_split[k], &from->inactive_split[k]);
        add_stat(&to->allocated_bytes[k], &from->allocated_bytes[k]);
        add_stat(&to->reserved_bytes[k], &from->reserved_bytes[k]);
        add_stat(&to->active_bytes[k], &from->active_bytes[k]);
        add_stat(&to->inactive_split_bytes[k], &from->inactive_split_bytes[k]);
        add_stat(&to->requested_bytes[k], &from->requested_bytes[k]);
    }
    add_stat(&to->oversize_allocations, &from->oversize_allocations);
    add_stat(&to->oversize_segments, &from->oversize_segments);
    to->num_alloc_retries += from->num_alloc_retries;
    to->num_ooms += from->num_ooms;
    to->num_sync_all_streams += from->num_sync_all_streams;
    to->num_device_alloc += from->num_device_alloc;
    to->num_device_free += from->num_device_free;
    to->pending_frees += from->pending_frees;
    to->pending_free_bytes += from->pending_free_bytes;
}

/* Summing devices adds their peaks: an upper bound of the process's peak. */
void fs_alloc_get_stats(fs_allocator *a, int device, fs_alloc_stats *out)
{
    memset(out, 0, sizeof *out);
    for (int i = 0; i < a->ndev; i++) {
        if (device >= 0 && i != device) continue;
        fs_dev *d = &a->devs[i];
        fs_alloc_stats snap;
        fs_stats_read(d, &snap);
        add_all(out, &snap);
        int64_t lf = largest_free(d);
        if (lf > out->largest_free_block) out->largest_free_block = lf;
    }
}

/* Peaks become the current sums, and every pool's room its current value:
 * the next rise anywhere is a new peak and settles. */
/* PyTorch's reset_accumulated_memory_stats: `allocated` and `freed` count
 * from now on, and the event counters restart at 0. The totals are kept
 * (the trace and the peaks need them); a baseline is taken instead. */
void fs_alloc_reset_accumulated(fs_allocator *a, int device)
{
    for (int i = 0; i < a->ndev; i++) {
        if (device >= 0 && i != device) continue;
        fs_dev *d = &a->devs[i];
        fs_stats_stop(d);
        int64_t total[FS_KINDS][FS_ST_POOL_FIELDS] = {{0}},
                cur[FS_KINDS][FS_ST_POOL_FIELDS] = {{0}};
        for (int k = 0; k < FS_KINDS; k++)
            for (int f = 0; f < NF; f++) {
                total[k][f] = d->gone_total[k][f];
                for (int j = 0; j < d->npools; j++) {
                    total[k][f] += d->pools[j]->st.row[k].total[f];
                    cur[k][f] += cur_get(d->pools[j]->st.row[k].cur, f);
                }
            }
        fs_spin_lock(&d->stats_lock);
        fs_dev_stats *s = &d->st;
        for (int k = 0; k < FS_KINDS; k++) {
            for (int f = 0; f < NF; f++) {
                s->acc_total[k][f] = total[k][f];
                s->acc_cur[k][f] = cur[k][f];
            }
            for (int f = 0; f < FS_ST_DEV_FIELDS; f++) {
                s->acc_total[k][NF + f] = s->total[k][f];
                s->acc_cur[k][NF + f] = get(&s->cur[k][f]);
            }
        }
        s->num_alloc_retries = s->num_ooms = s->num_sync_all_streams = 0;
        s->num_device_alloc = s->num_device_free = 0;
        s->oversize_allocations.allocated = s->oversize_allocations.freed = 0;
        s->oversize_segments.allocated = s->oversize_segments.freed = 0;
        fs_spin_unlock(&d->stats_lock);
        fs_stats_resume(d);
    }
}

void fs_alloc_reset_peak(fs_allocator *a, int device)
{
    for (int i = 0; i < a->ndev; i++) {
        if (device >= 0 && i != device) continue;
        fs_dev *d = &a->devs[i];
        fs_stats_stop(d);
        fs_spin_lock(&d->room_lock);
        for (int slot = 0; slot < FS_SIZE_CLASSES; slot++) {
            for (int f = 0; f < NF; f++) {
                int64_t sum = 0;
                for (int j = 0; j < d->npools; j++) {
                    fs_cache_stats *s = &d->pools[j]->st;
                    int64_t v = value(s, slot, f);
                    room_of(s, slot)[f] = low_of(s, slot)[f] = v;
                    sum += v;
                }
                d->peak[slot][f] = sum;
                d->free_room[slot][f] = 0;
            }
        }
        fs_spin_unlock(&d->room_lock);
        fs_spin_lock(&d->stats_lock);
        fs_dev_stats *s = &d->st;
        for (int f = 0; f < FS_ST_DEV_FIELDS; f++) {
            s->peak[FS_SIZE_ALL][f] = 0;
            for (int k = 0; k < FS_KINDS; k++) {
                s->peak[k + 1][f] = get(&s->cur[k][f]);
                s->peak[FS_SIZE_ALL][f] += get(&s->cur[k][f]);
            }
        }
        s->oversize_allocations.peak = s->oversize_allocations.current;
        s->oversize_segments.peak = s->oversize_segments.current;
        fs_spin_unlock(&d->stats_lock);
        fs_stats_resume(d);
    }
}
