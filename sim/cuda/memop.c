/* memop.c - stream memory operations: cuStreamWriteValue32/64,
 * cuStreamWaitValue32/64 and cuStreamBatchMemOp, each with its _ptsz
 * variant.
 *
 * A call is one op on its stream (sim_stream_enqueue), in order with
 * kernels and copies: a write stores the value, a wait holds the stream
 * (its worker polls the word) until the condition cuda.h gives holds, as a
 * GPU's front end does; so a stream waiting for a value that never comes
 * hangs, as on a GPU. The word must lie in memory the device reaches
 * (device or pinned host memory), naturally aligned. In a dry run
 * (FSDPSHIM_SIM_DATA=0) device memory is never touched: writes there store
 * nothing and waits there pass at once, where nothing could ever write the
 * word; pinned host memory is still written and waited on. These ops cannot
 * be captured into a graph here (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: the
 * sim's graphs have no memory-operation node); memory barriers and remote
 * write flushes have nothing to order beyond the stream's own order. */
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "driver_internal.h"

/* One operation, checked and ready to run. */
struct memop {
    CUstreamBatchMemOpType type; /* only the four with a word */
    void *addr;
    uint64_t value;
    unsigned flags; /* a wait's condition */
    bool touch;     /* the word may be read or written */
};

struct memops {
    unsigned n;
    struct memop op[];
};

/* Whether the word's memory may be touched now: always with data, else only
 * host memory (pinned, or managed memory, which stays host memory). */
static bool touchable(uintptr_t addr)
{
    struct sim_range r;
    if (sim_moves_data()) return true;
    return sim_registry_find(addr, &r) && (!sim_range_is_device(&r) || r.kind == SIM_RANGE_MANAGED);
}

/* cuda.h's conditions, on the word's current value. */
static bool condition_holds(const struct memop *o)
{
    bool wide = o->type == CU_STREAM_MEM_OP_WAIT_VALUE_64;
    uint64_t v = wide ? __atomic_load_n((uint64_t *)o->addr, __ATOMIC_ACQUIRE)
                      : __atomic_load_n((uint32_t *)o->addr, __ATOMIC_ACQUIRE);
    uint64_t want = o->value;
    switch (o->flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) {
    case CU_STREAM_WAIT_VALUE_GEQ: /* (int32_t)(*addr - value) >= 0, or int64_t */
        return wide ? (int64_t)(v - want) >= 0 : (int32_t)(uint32_t)(v - want) >= 0;
    case CU_STREAM_WAIT_VALUE_EQ:
        return v == want;
    case CU_STREAM_WAIT_VALUE_AND:
        return (v & want) != 0;
    default: /* CU_STREAM_WAIT_VALUE_NOR: ~(*addr | value) != 0 */
        return wide ? ~(v | want) != 0 : (uint32_t) ~(v | want) != 0;
    }
}

static void run_memops(void *arg)
{
    struct memops *ops = arg;
    for (unsigned i = 0; i < ops->n; i++) {
        struct memop *o = &ops->op[i];
        if (!o->touch) continue;
        switch (o->type) {
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
            __atomic_store_n((uint32_t *)o->addr, (uint32_t)o->value, __ATOMIC_RELEASE);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            __atomic_store_n((uint64_t *)o->addr, o->value, __ATOMIC_RELEASE);
            break;
        default: /* a wait: poll, as the GPU's front end does */
            while (!condition_holds(o))
                nanosleep(&(struct timespec){0, 20000}, NULL);
        }
    }
    free(ops);
}

/* The value a wait or write operates with, from its 32- or 64-bit field;
 * returns the word's size. */
static size_t operand(int is32, cuuint32_t value, cuuint64_t value64, uint64_t *out)
{
    *out = is32 ? value : value64;
    return is32 ? 4 : 8;
}

/* Checks one operation of cuStreamBatchMemOp's form and fills *o. */
static CUresult check(const CUstreamBatchMemOpParams *p, struct memop *o)
{
    *o = (struct memop){p->operation, NULL, 0, 0, false};
    CUdeviceptr addr;
    size_t size;
    switch (p->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        if ((p->waitValue.flags & ~(unsigned)CU_STREAM_WAIT_VALUE_FLUSH) > CU_STREAM_WAIT_VALUE_NOR)
            return CUDA_ERROR_INVALID_VALUE;
        if (p->waitValue.flags & CU_STREAM_WAIT_VALUE_FLUSH)
            return CUDA_ERROR_NOT_SUPPORTED; /* CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES: 0 */
        addr = p->waitValue.address;
        o->flags = p->waitValue.flags;
        size = operand(p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_32, p->waitValue.value,
                       p->waitValue.value64, &o->value);
        break;
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        /* Every write is ordered after the stream's earlier work: the
         * barrier the default flag asks for is already there. */
        if (p->writeValue.flags & ~(unsigned)CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
            return CUDA_ERROR_INVALID_VALUE;
        addr = p->writeValue.address;
        size = operand(p->operation == CU_STREAM_MEM_OP_WRITE_VALUE_32, p->writeValue.value,
                       p->writeValue.value64, &o->value);
        break;
    case CU_STREAM_MEM_OP_BARRIER:
        return p->memoryBarrier.flags > CU_STREAM_MEMORY_BARRIER_TYPE_GPU ? CUDA_ERROR_INVALID_VALUE
                                                                          : CUDA_SUCCESS;
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return p->flushRemoteWrites.flags ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!addr || addr % size || !sim_registry_covers((uintptr_t)addr, size))
        return CUDA_ERROR_INVALID_VALUE;
    o->addr = (void *)(uintptr_t)addr;
    o->touch = touchable((uintptr_t)addr);
    return CUDA_SUCCESS;
}

/* cuda.h: fewer than 256 operations in a batch; flags must be 0. */
static CUresult batch(CUstream s, unsigned count, const CUstreamBatchMemOpParams *params,
                      unsigned flags, int pt)
{
    CUresult res = sim_cu_ready();
    if (res || (res = sim_cu_stream_context(s))) return res;
    if (!count || count >= 256 || !params || flags) return CUDA_ERROR_INVALID_VALUE;
    struct memops *ops = malloc(sizeof *ops + count * sizeof ops->op[0]);
    if (!ops) return CUDA_ERROR_OUT_OF_MEMORY;
    ops->n = 0;
    for (unsigned i = 0; i < count; i++) {
        struct memop o;
        if ((res = check(&params[i], &o))) {
            free(ops);
            return res;
        }
        if (o.addr) ops->op[ops->n++] = o; /* barriers have nothing to do */
    }
    cudaError_t err = sim_stream_enqueue((cudaStream_t)s, pt, run_memops, ops);
    if (err) free(ops);
    return sim_cu_result(err);
}

SIM_API CUresult cuStreamBatchMemOp_v2(CUstream s, unsigned int count,
                                       CUstreamBatchMemOpParams *params, unsigned int flags)
{
    return batch(s, count, params, flags, 0);
}

SIM_API CUresult cuStreamBatchMemOp_v2_ptsz(CUstream s, unsigned int count,
                                            CUstreamBatchMemOpParams *params, unsigned int flags)
{
    return batch(s, count, params, flags, 1);
}
/* the CUDA 8.0 ABIs, whose signatures did not change */
SIM_CU_ALIAS(cuStreamBatchMemOp, cuStreamBatchMemOp_v2);
SIM_CU_ALIAS(cuStreamBatchMemOp_ptsz, cuStreamBatchMemOp_v2_ptsz);

/* One operation as a batch of one. */
static CUresult one(CUstream s, CUstreamBatchMemOpType type, CUdeviceptr addr, uint64_t value,
                    unsigned flags, int pt)
{
    CUstreamBatchMemOpParams p = {.operation = type};
    if (type == CU_STREAM_MEM_OP_WAIT_VALUE_32 || type == CU_STREAM_MEM_OP_WAIT_VALUE_64) {
        p.waitValue.address = addr;
        p.waitValue.value64 = value;
        if (type == CU_STREAM_MEM_OP_WAIT_VALUE_32) p.waitValue.value = (uint32_t)value;
        p.waitValue.flags = flags;
    } else {
        p.writeValue.address = addr;
        p.writeValue.value64 = value;
        if (type == CU_STREAM_MEM_OP_WRITE_VALUE_32) p.writeValue.value = (uint32_t)value;
        p.writeValue.flags = flags;
    }
    return batch(s, 1, &p, 0, pt);
}

#define MEMOP_FORMS(name, value_type, op)                                                          \
    SIM_API CUresult name##_v2(CUstream s, CUdeviceptr addr, value_type value, unsigned int flags) \
    {                                                                                              \
        return one(s, op, addr, value, flags, 0);                                                  \
    }                                                                                              \
    SIM_API CUresult name##_v2_ptsz(CUstream s, CUdeviceptr addr, value_type value,                \
                                    unsigned int flags)                                            \
    {                                                                                              \
        return one(s, op, addr, value, flags, 1);                                                  \
    }

MEMOP_FORMS(cuStreamWriteValue32, cuuint32_t, CU_STREAM_MEM_OP_WRITE_VALUE_32)
MEMOP_FORMS(cuStreamWriteValue64, cuuint64_t, CU_STREAM_MEM_OP_WRITE_VALUE_64)
MEMOP_FORMS(cuStreamWaitValue32, cuuint32_t, CU_STREAM_MEM_OP_WAIT_VALUE_32)
MEMOP_FORMS(cuStreamWaitValue64, cuuint64_t, CU_STREAM_MEM_OP_WAIT_VALUE_64)

/* The first ABIs (CUDA 8.0; 9.0 for 64 bits), whose signatures did not
 * change. */
SIM_CU_ALIAS(cuStreamWriteValue32, cuStreamWriteValue32_v2);
SIM_CU_ALIAS(cuStreamWriteValue32_ptsz, cuStreamWriteValue32_v2_ptsz);
SIM_CU_ALIAS(cuStreamWriteValue64, cuStreamWriteValue64_v2);
SIM_CU_ALIAS(cuStreamWriteValue64_ptsz, cuStreamWriteValue64_v2_ptsz);
SIM_CU_ALIAS(cuStreamWaitValue32, cuStreamWaitValue32_v2);
SIM_CU_ALIAS(cuStreamWaitValue32_ptsz, cuStreamWaitValue32_v2_ptsz);
SIM_CU_ALIAS(cuStreamWaitValue64, cuStreamWaitValue64_v2);
SIM_CU_ALIAS(cuStreamWaitValue64_ptsz, cuStreamWaitValue64_v2_ptsz);
