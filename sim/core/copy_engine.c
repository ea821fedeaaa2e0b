/* copy_engine.c - stream-ordered byte moves: the copies and sets behind the
 * runtime's cudaMemcpy* and cudaMemset* (their entry points are in
 * sim/cudart/memcpy.c) and the driver's cuMemcpy* and cuMemset*
 * (sim_drv_copy).
 *
 * Every copy and set is an op on its stream (legacy or per-thread for the
 * synchronous forms). When the caller waits follows the runtime's documented
 * behaviour: a copy that touches pageable host memory blocks until it is
 * done, even through cudaMemcpyAsync; with pinned memory (or device to
 * device) cudaMemcpyAsync returns at once; synchronous cudaMemcpy waits
 * except device to device; cudaMemset on device memory does not wait. The
 * direction is never needed (addresses are unified) but an invalid kind is
 * still refused, and so is a side that the kind names as device memory
 * when it is memory the device cannot reach (a freed or never allocated
 * pointer, which the move would otherwise read or write on the host). In a
 * dry run (FSDPSHIM_SIM_DATA=0) every check, the op on the stream and the
 * caller's wait stay; only device memory is never touched: a copy or set
 * into device memory moves nothing, and a copy from device memory into host
 * memory writes zeros there, what device memory that was never written
 * holds, so whatever a program reads back (an RNG state, a count that sizes
 * its next allocation) is the same on every run and every rank instead of
 * whatever the host buffer held. Host-to-host copies, sets of pinned host
 * memory and managed memory (host memory in a dry run too) move their
 * bytes. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* What a move does with the bytes: all of them, except in a dry run. */
enum move_bytes { MOVE_BYTES, MOVE_ZEROS, MOVE_NOTHING };

struct move {
    char *dst;
    const char *src;             /* NULL for a memset */
    size_t width, height, depth; /* bytes of a row, rows of a slice, slices */
    size_t dpitch, spitch;       /* bytes from one row to the next */
    size_t dslice, sslice;       /* bytes from one slice to the next */
    uint32_t value;              /* a set's value, of `elem` bytes */
    unsigned elem;               /* 1, 2 or 4; width is a multiple of it */
    enum move_bytes bytes;
};

/* One row of a set: the value, elem bytes at a time. */
static void set_row(char *d, const struct move *m)
{
    if (m->elem == 1) {
        memset(d, (int)(m->value & 0xff), m->width);
    } else if (m->elem == 2) {
        uint16_t v = (uint16_t)m->value;
        for (size_t i = 0; i < m->width; i += 2)
            memcpy(d + i, &v, 2);
    } else {
        for (size_t i = 0; i < m->width; i += 4)
            memcpy(d + i, &m->value, 4);
    }
}

/* Leaves m alone: a graph may replay it (sim_stream_add_work frees it). */
static void run_move(void *p)
{
    struct move *m = p;
    for (size_t z = 0; m->bytes != MOVE_NOTHING && z < m->depth; z++) {
        for (size_t row = 0; row < m->height; row++) {
            char *d = m->dst + z * m->dslice + row * m->dpitch;
            if (m->bytes == MOVE_ZEROS)
                memset(d, 0, m->width);
            else if (m->src)
                memmove(d, m->src + z * m->sslice + row * m->spitch, m->width);
            else
                set_row(d, m);
        }
    }
}

/* Whether a dry run may touch p: host memory, and managed memory, which
 * stays host memory in a dry run (sim/cudart/managed.c). */
static int dry_touchable(const void *p)
{
    struct sim_range r;
    return !sim_registry_find((uintptr_t)p, &r) || !sim_range_is_device(&r) ||
           r.kind == SIM_RANGE_MANAGED;
}

/* What a move from src (NULL: a set) to dst does with the bytes. */
static enum move_bytes move_bytes(void *dst, const void *src)
{
    if (sim_cfg.moves_data) return MOVE_BYTES;
    if (!dry_touchable(dst)) return MOVE_NOTHING;
    return !src || dry_touchable(src) ? MOVE_BYTES : MOVE_ZEROS;
}

/* Enqueues a copy of the move on `s`; its sequence number goes to *seq (0
 * when s captures it into a graph: nothing to wait for). */
static cudaError_t submit_move(struct sim_stream *s, struct move move, uint64_t *seq)
{
    struct move *m = malloc(sizeof *m);
    if (!m) return cudaErrorMemoryAllocation;
    *m = move;
    enum cudaGraphNodeType type = move.src ? cudaGraphNodeTypeMemcpy : cudaGraphNodeTypeMemset;
    cudaError_t err =
        sim_stream_add_work(s, &(struct sim_work){type, run_move, free, m, 0}, NULL, seq);
    if (err) free(m);
    return err;
}

enum side { SIDE_PAGEABLE, SIDE_PINNED, SIDE_DEVICE };

/* What the span [p, p+n) is; cudaErrorInvalidValue for NULL or a span that
 * starts in device memory and runs past its allocation (or, in a VMM
 * reservation, past the mappings that follow it without a hole). *sync:
 * the range asks synchronous calls to wait (SIM_RANGE_SYNC_MEMOPS). */
static cudaError_t classify(const void *p, size_t n, enum side *side, bool *sync)
{
    struct sim_range r;
    if (!p) return cudaErrorInvalidValue;
    if (!sim_registry_find((uintptr_t)p, &r)) {
        *side = SIDE_PAGEABLE;
        return cudaSuccess;
    }
    if (!sim_registry_covers((uintptr_t)p, n)) return cudaErrorInvalidValue;
    *side = sim_range_is_device(&r) ? SIDE_DEVICE : SIDE_PINNED;
    *sync = *sync || (r.flags & SIM_RANGE_SYNC_MEMOPS);
    return cudaSuccess;
}

/* Whether `kind` says that the destination (dst_side) or the source is
 * device memory: only cudaMemcpyDefault leaves it to the addresses. */
static bool kind_names_device(enum cudaMemcpyKind kind, bool dst_side)
{
    if (kind == cudaMemcpyDeviceToDevice) return true;
    return dst_side ? kind == cudaMemcpyHostToDevice : kind == cudaMemcpyDeviceToHost;
}

/* The bytes from the first to one past the last a move touches on one
 * side; SIZE_MAX when that overflows (no range can cover it). */
static size_t span(size_t pitch, size_t slice, const struct move *m)
{
    size_t rows, slices, sum;
    if (!m->width || !m->height || !m->depth) return 0;
    if (__builtin_mul_overflow(pitch, m->height - 1, &rows) ||
        __builtin_mul_overflow(slice, m->depth - 1, &slices) ||
        __builtin_add_overflow(rows, slices, &sum) || __builtin_add_overflow(sum, m->width, &sum))
        return SIZE_MAX;
    return sum;
}

/* A copy (m.src set) or set of up to three dimensions on stream sh, with
 * the runtime's checks, waits and last-error rules. A set writes memory the
 * device reaches (device or pinned host memory); a copy names the sides it
 * takes for device memory with its kind. */
static cudaError_t move_3d(struct move m, enum cudaMemcpyKind kind, cudaStream_t sh, int pt,
                           enum sim_copy_mode mode)
{
    sim_init();
    if (m.src && (unsigned)kind > cudaMemcpyDefault)
        return sim_record_error(cudaErrorInvalidMemcpyDirection);
    if ((m.height > 1 || m.depth > 1) && (m.width > m.dpitch || (m.src && m.width > m.spitch)))
        return sim_record_error(cudaErrorInvalidPitchValue);
    struct sim_stream *s;
    cudaError_t err = sim_stream_resolve(sh, pt, &s);
    if (err) return sim_record_error(err);
    if (m.width == 0 || m.height == 0 || m.depth == 0) return cudaSuccess;
    enum side ds, ss = SIDE_DEVICE;
    bool sync_memops = false;
    err = classify(m.dst, span(m.dpitch, m.dslice, &m), &ds, &sync_memops);
    if (!err && m.src) err = classify(m.src, span(m.spitch, m.sslice, &m), &ss, &sync_memops);
    if (!err && !m.src && ds == SIDE_PAGEABLE)
        err = cudaErrorInvalidValue; /* memset needs memory the device can reach */
    if (!err && m.src &&
        ((ds == SIDE_PAGEABLE && kind_names_device(kind, true)) ||
         (ss == SIDE_PAGEABLE && kind_names_device(kind, false))))
        err = cudaErrorInvalidValue;
    if (err) return sim_record_error(err);

    uint64_t seq;
    m.bytes = move_bytes(m.dst, m.src);
    err = submit_move(s, m, &seq);
    if (err) return sim_record_error(err);
    int wait;
    if (!m.src) /* a set waits only when it is synchronous and on pinned memory */
        wait = mode == SIM_COPY_SYNC && ds == SIDE_PINNED;
    else if (mode == SIM_COPY_SYNC)
        wait = !(ds == SIDE_DEVICE && ss == SIDE_DEVICE);
    else
        wait = ds == SIDE_PAGEABLE || ss == SIDE_PAGEABLE;
    if (wait || (mode == SIM_COPY_SYNC && sync_memops)) sim_stream_wait(s, seq);
    return cudaSuccess;
}

cudaError_t sim_copy_2d(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                        size_t height, enum cudaMemcpyKind kind, cudaStream_t sh, int pt,
                        enum sim_copy_mode mode)
{
    struct move m = {dst, src, width, height, 1, dpitch, spitch, 0, 0, 0, 1, MOVE_BYTES};
    return move_3d(m, kind, sh, pt, mode);
}

cudaError_t sim_memcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind,
                       cudaStream_t s, int per_thread, int async)
{
    return sim_copy_2d(dst, n, src, n, n, 1, kind, s, per_thread,
                       async ? SIM_COPY_ASYNC : SIM_COPY_SYNC);
}

/* The driver's copies and sets (sim/cuda/copy.c), leaving the runtime's
 * last error as it was. */
SIM_SEAM cudaError_t sim_drv_copy(const struct sim_copy *c, cudaStream_t s, int per_thread,
                                  int async)
{
    if (!c->src && c->elem != 1 && c->elem != 2 && c->elem != 4) return cudaErrorInvalidValue;
    struct move m = {c->dst,
                     c->src,
                     c->width,
                     c->height,
                     c->depth,
                     c->dpitch,
                     c->spitch,
                     c->dpitch * c->dheight,
                     c->spitch * c->sheight,
                     c->value,
                     c->src ? 1 : c->elem,
                     MOVE_BYTES};
    return SIM_QUIETLY(move_3d(m, c->kind, s, per_thread, async ? SIM_COPY_ASYNC : SIM_COPY_SYNC));
}

cudaError_t sim_set_2d(void *dst, size_t pitch, int value, size_t width, size_t height,
                       cudaStream_t sh, int pt, enum sim_copy_mode mode)
{
    struct move m = {dst, NULL, width, height, 1, pitch, 0, 0, 0, (uint32_t)value, 1, MOVE_BYTES};
    return move_3d(m, cudaMemcpyDefault, sh, pt, mode);
}
