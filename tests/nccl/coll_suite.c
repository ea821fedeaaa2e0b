/* coll_suite.c - exact data checks of every simulated-NCCL collective.
 *
 * Inputs are small integers so that every data type (fp8 included) holds
 * them and every reduction of them exactly; the expected values are
 * computed on the host in double. Large counts cross the sim's 1 MiB
 * staging chunk and 256 KiB mailbox, so chunking is exercised too. */
#include "coll_suite.h"

#include "nccl_check.h"

/* A buffer per local rank, on that rank's device. */
struct bufs {
    void *dev[SUITE_MAX];
    void *host[SUITE_MAX];
};

static int dev_of(struct suite *s, int l)
{
    int d;
    CHECK_NCCL(ncclCommCuDevice(s->comm[l], &d));
    return d;
}

void suite_streams(struct suite *s)
{
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaSetDevice(dev_of(s, l)));
        CHECK_CUDA(cudaStreamCreateWithFlags(&s->stream[l], cudaStreamNonBlocking));
    }
}

static void bufs_alloc(struct suite *s, struct bufs *b, size_t bytes)
{
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaSetDevice(dev_of(s, l)));
        CHECK_CUDA(cudaMalloc(&b->dev[l], bytes ? bytes : 1));
        b->host[l] = calloc(1, bytes ? bytes : 1);
        CHECK(b->host[l] != NULL, "out of memory");
    }
}

static void bufs_free(struct suite *s, struct bufs *b)
{
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaSetDevice(dev_of(s, l)));
        CHECK_CUDA(cudaFree(b->dev[l]));
        free(b->host[l]);
    }
}

static void bufs_upload(struct suite *s, struct bufs *b, size_t bytes)
{
    for (int l = 0; l < s->nlocal; l++)
        CHECK_CUDA(cudaMemcpy(b->dev[l], b->host[l], bytes, cudaMemcpyHostToDevice));
}

/* Waits for the local ranks' streams, then copies results back. */
static void bufs_download(struct suite *s, struct bufs *b, size_t bytes)
{
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaStreamSynchronize(s->stream[l]));
        ncclResult_t async;
        CHECK_NCCL(ncclCommGetAsyncError(s->comm[l], &async));
        CHECK(async == ncclSuccess, "async error %s", ncclGetErrorString(async));
        CHECK_CUDA(cudaMemcpy(b->host[l], b->dev[l], bytes, cudaMemcpyDeviceToHost));
    }
}

/* Value of element i of rank r's input: small, exact in every type. */
static double small_val(int r, size_t i)
{
    return (double)((r + (int)i) % 3);
}
/* A larger float pattern, exact in float. */
static double big_val(int r, size_t i)
{
    return (double)(r * 1000 + (int)(i % 1000));
}

static void fill(ncclDataType_t t, void *p, int r, size_t n, size_t base, double (*f)(int, size_t))
{
    for (size_t i = 0; i < n; i++)
        tn_set(t, p, i, f(r, base + i));
}

static void expect(ncclDataType_t t, const void *p, size_t i, double want, const char *what,
                   int rank)
{
    double got = tn_get(t, p, i);
    CHECK(got == want, "%s type %d rank %d elem %zu: got %g want %g", what, (int)t, rank, i, got,
          want);
}

static void test_allgather(struct suite *s, size_t count, int inplace)
{
    size_t n = (size_t)s->nranks, es = sizeof(float);
    struct bufs in, out;
    bufs_alloc(s, &out, n * count * es);
    bufs_alloc(s, &in, count * es);
    for (int l = 0; l < s->nlocal; l++) {
        fill(ncclFloat, in.host[l], s->rank[l], count, 0, big_val);
        if (inplace)
            fill(ncclFloat, (char *)out.host[l] + s->rank[l] * count * es, s->rank[l], count, 0,
                 big_val);
    }
    bufs_upload(s, inplace ? &out : &in, inplace ? n * count * es : count * es);
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++) {
        const void *src = inplace ? (char *)out.dev[l] + s->rank[l] * count * es : in.dev[l];
        CHECK_NCCL(ncclAllGather(src, out.dev[l], count, ncclFloat, s->comm[l], s->stream[l]));
    }
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, n * count * es);
    for (int l = 0; l < s->nlocal; l++)
        for (int r = 0; r < s->nranks; r++)
            for (size_t i = 0; i < count; i++)
                expect(ncclFloat, out.host[l], r * count + i, big_val(r, i), "allgather",
                       s->rank[l]);
    bufs_free(s, &in);
    bufs_free(s, &out);
}

static void test_reducescatter(struct suite *s, size_t count, int inplace)
{
    size_t n = (size_t)s->nranks, es = sizeof(float);
    struct bufs in, out;
    bufs_alloc(s, &in, n * count * es);
    bufs_alloc(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++)
        fill(ncclFloat, in.host[l], s->rank[l], n * count, 0, big_val);
    bufs_upload(s, &in, n * count * es);
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++) {
        void *dst = inplace ? (char *)in.dev[l] + s->rank[l] * count * es : out.dev[l];
        CHECK_NCCL(
            ncclReduceScatter(in.dev[l], dst, count, ncclFloat, ncclSum, s->comm[l], s->stream[l]));
    }
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, inplace ? &in : &out, inplace ? n * count * es : count * es);
    for (int l = 0; l < s->nlocal; l++) {
        int me = s->rank[l];
        const char *res = inplace ? (char *)in.host[l] + me * count * es : out.host[l];
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < s->nranks; r++)
                want += big_val(r, me * count + i);
            expect(ncclFloat, res, i, want, "reducescatter", me);
        }
    }
    bufs_free(s, &in);
    bufs_free(s, &out);
}

/* All-reduce of every type with every built-in operator. */
static void test_allreduce_types(struct suite *s)
{
    const size_t count = 257;
    for (int t = 0; t < ncclNumTypes; t++) {
        size_t es = tn_size((ncclDataType_t)t);
        for (int op = 0; op < ncclNumOps; op++) {
            struct bufs in, out;
            bufs_alloc(s, &in, count * es);
            bufs_alloc(s, &out, count * es);
            for (int l = 0; l < s->nlocal; l++)
                fill((ncclDataType_t)t, in.host[l], s->rank[l], count, 0, small_val);
            bufs_upload(s, &in, count * es);
            CHECK_NCCL(ncclGroupStart());
            for (int l = 0; l < s->nlocal; l++)
                CHECK_NCCL(ncclAllReduce(in.dev[l], out.dev[l], count, (ncclDataType_t)t,
                                         (ncclRedOp_t)op, s->comm[l], s->stream[l]));
            CHECK_NCCL(ncclGroupEnd());
            bufs_download(s, &out, count * es);
            int integer = t <= ncclUint64;
            for (size_t i = 0; i < count; i++) {
                double acc = small_val(0, i);
                for (int r = 1; r < s->nranks; r++) {
                    double v = small_val(r, i);
                    switch (op) {
                    case ncclProd:
                        acc *= v;
                        break;
                    case ncclMax:
                        acc = v > acc ? v : acc;
                        break;
                    case ncclMin:
                        acc = v < acc ? v : acc;
                        break;
                    default:
                        acc += v;
                        break;
                    }
                }
                if (op == ncclAvg) acc = integer ? floor(acc / s->nranks) : acc / s->nranks;
                for (int l = 0; l < s->nlocal; l++)
                    expect((ncclDataType_t)t, out.host[l], i, acc, "allreduce", s->rank[l]);
            }
            bufs_free(s, &in);
            bufs_free(s, &out);
        }
    }
}

static void test_allreduce_inplace_big(struct suite *s)
{
    const size_t count = 300000;
    struct bufs b;
    bufs_alloc(s, &b, count * sizeof(float));
    for (int l = 0; l < s->nlocal; l++)
        fill(ncclFloat, b.host[l], s->rank[l], count, 0, big_val);
    bufs_upload(s, &b, count * sizeof(float));
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(
            ncclAllReduce(b.dev[l], b.dev[l], count, ncclFloat, ncclMax, s->comm[l], s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &b, count * sizeof(float));
    for (int l = 0; l < s->nlocal; l++)
        for (size_t i = 0; i < count; i++)
            expect(ncclFloat, b.host[l], i, big_val(s->nranks - 1, i), "allreduce-inplace",
                   s->rank[l]);
    bufs_free(s, &b);
}

/* Pre-multiplied sum: each rank scales by its own host scalar (rank + 1). */
static void test_premulsum(struct suite *s)
{
    const size_t count = 1000;
    struct bufs in, out;
    ncclRedOp_t ops[SUITE_MAX];
    bufs_alloc(s, &in, count * sizeof(double));
    bufs_alloc(s, &out, count * sizeof(double));
    for (int l = 0; l < s->nlocal; l++) {
        double scalar = s->rank[l] + 1;
        fill(ncclFloat64, in.host[l], s->rank[l], count, 0, big_val);
        CHECK_NCCL(ncclRedOpCreatePreMulSum(&ops[l], &scalar, ncclFloat64, ncclScalarHostImmediate,
                                            s->comm[l]));
    }
    bufs_upload(s, &in, count * sizeof(double));
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(ncclAllReduce(in.dev[l], out.dev[l], count, ncclFloat64, ops[l], s->comm[l],
                                 s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(ncclRedOpDestroy(ops[l], s->comm[l]));
    bufs_download(s, &out, count * sizeof(double));
    for (int l = 0; l < s->nlocal; l++)
        for (size_t i = 0; i < count; i++) {
            double want = 0;
            for (int r = 0; r < s->nranks; r++)
                want += (r + 1) * big_val(r, i);
            expect(ncclFloat64, out.host[l], i, want, "premulsum", s->rank[l]);
        }
    bufs_free(s, &in);
    bufs_free(s, &out);
}

/* Broadcast (out of place) and Bcast (in place). */
static void test_broadcast(struct suite *s, size_t count, int root, int inplace)
{
    size_t es = sizeof(float);
    struct bufs in, out;
    bufs_alloc(s, &in, count * es);
    bufs_alloc(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++)
        fill(ncclFloat, inplace ? out.host[l] : in.host[l], s->rank[l], count, 0, big_val);
    bufs_upload(s, inplace ? &out : &in, count * es);
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++) {
        if (inplace)
            CHECK_NCCL(ncclBcast(out.dev[l], count, ncclFloat, root, s->comm[l], s->stream[l]));
        else
            CHECK_NCCL(ncclBroadcast(in.dev[l], out.dev[l], count, ncclFloat, root, s->comm[l],
                                     s->stream[l]));
    }
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++)
        for (size_t i = 0; i < count; i++)
            expect(ncclFloat, out.host[l], i, big_val(root, i), "broadcast", s->rank[l]);
    bufs_free(s, &in);
    bufs_free(s, &out);
}

/* Reduce, AlltoAll, Gather and Scatter on int32. */
static void test_rooted_and_alltoall(struct suite *s)
{
    const size_t count = 5000;
    size_t n = (size_t)s->nranks, es = sizeof(int32_t);
    const int root = s->nranks - 1;
    struct bufs in, out;
    bufs_alloc(s, &in, n * count * es);
    bufs_alloc(s, &out, n * count * es);
    for (int l = 0; l < s->nlocal; l++)
        fill(ncclInt32, in.host[l], s->rank[l], n * count, 0, big_val);
    bufs_upload(s, &in, n * count * es);

    /* Reduce (sum) to root. */
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(ncclReduce(in.dev[l], out.dev[l], count, ncclInt32, ncclSum, root, s->comm[l],
                              s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++)
        if (s->rank[l] == root)
            for (size_t i = 0; i < count; i++) {
                double want = 0;
                for (int r = 0; r < s->nranks; r++)
                    want += big_val(r, i);
                expect(ncclInt32, out.host[l], i, want, "reduce", root);
            }

    /* AlltoAll: block r of my output is block me of rank r's input. */
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(ncclAlltoAll(in.dev[l], out.dev[l], count, ncclInt32, s->comm[l], s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, n * count * es);
    for (int l = 0; l < s->nlocal; l++)
        for (int r = 0; r < s->nranks; r++)
            for (size_t i = 0; i < count; i++)
                expect(ncclInt32, out.host[l], r * count + i, big_val(r, s->rank[l] * count + i),
                       "alltoall", s->rank[l]);

    /* Gather to rank 0. */
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(
            ncclGather(in.dev[l], out.dev[l], count, ncclInt32, 0, s->comm[l], s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, n * count * es);
    for (int l = 0; l < s->nlocal; l++)
        if (s->rank[l] == 0)
            for (int r = 0; r < s->nranks; r++)
                for (size_t i = 0; i < count; i++)
                    expect(ncclInt32, out.host[l], r * count + i, big_val(r, i), "gather", 0);

    /* Scatter from root: I get block me of root's input. */
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(
            ncclScatter(in.dev[l], out.dev[l], count, ncclInt32, root, s->comm[l], s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++)
        for (size_t i = 0; i < count; i++)
            expect(ncclInt32, out.host[l], i, big_val(root, s->rank[l] * count + i), "scatter",
                   s->rank[l]);
    bufs_free(s, &in);
    bufs_free(s, &out);
}

/* A ring: everyone sends to the next rank and receives from the previous,
 * in one group, with the receive called first on odd ranks. */
static void test_sendrecv_ring(struct suite *s)
{
    const size_t count = 200000; /* several mailbox trips */
    size_t es = sizeof(float);
    struct bufs in, out;
    bufs_alloc(s, &in, count * es);
    bufs_alloc(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++)
        fill(ncclFloat, in.host[l], s->rank[l], count, 0, big_val);
    bufs_upload(s, &in, count * es);
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++) {
        int me = s->rank[l], next = (me + 1) % s->nranks, prev = (me + s->nranks - 1) % s->nranks;
        if (me % 2)
            CHECK_NCCL(ncclRecv(out.dev[l], count, ncclFloat, prev, s->comm[l], s->stream[l]));
        CHECK_NCCL(ncclSend(in.dev[l], count, ncclFloat, next, s->comm[l], s->stream[l]));
        if (!(me % 2))
            CHECK_NCCL(ncclRecv(out.dev[l], count, ncclFloat, prev, s->comm[l], s->stream[l]));
    }
    CHECK_NCCL(ncclGroupEnd());
    bufs_download(s, &out, count * es);
    for (int l = 0; l < s->nlocal; l++) {
        int prev = (s->rank[l] + s->nranks - 1) % s->nranks;
        for (size_t i = 0; i < count; i++)
            expect(ncclFloat, out.host[l], i, big_val(prev, i), "sendrecv", s->rank[l]);
    }
    bufs_free(s, &in);
    bufs_free(s, &out);
}

/* Split by parity, key = -rank (so new ranks come in reverse order), then
 * an all-reduce of the old ranks on each half. */
static void test_split(struct suite *s)
{
    struct suite child = {.nlocal = s->nlocal};
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(ncclCommSplit(s->comm[l], s->rank[l] % 2, -s->rank[l], &child.comm[l], NULL));
    CHECK_NCCL(ncclGroupEnd());
    for (int l = 0; l < s->nlocal; l++) {
        int me = s->rank[l], size = 0, newrank, count;
        for (int r = 0; r < s->nranks; r++)
            size += r % 2 == me % 2;
        int above = 0; /* same-parity ranks with a larger old rank come first */
        for (int r = me + 1; r < s->nranks; r++)
            above += r % 2 == me % 2;
        CHECK_NCCL(ncclCommCount(child.comm[l], &count));
        CHECK_NCCL(ncclCommUserRank(child.comm[l], &newrank));
        CHECK(count == size && newrank == above, "split: rank %d got %d/%d, want %d/%d", me,
              newrank, count, above, size);
        child.rank[l] = newrank;
        child.stream[l] = s->stream[l];
    }
    struct bufs b;
    bufs_alloc(s, &b, sizeof(int64_t));
    for (int l = 0; l < s->nlocal; l++)
        ((int64_t *)b.host[l])[0] = s->rank[l];
    bufs_upload(s, &b, sizeof(int64_t));
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        CHECK_NCCL(
            ncclAllReduce(b.dev[l], b.dev[l], 1, ncclInt64, ncclSum, child.comm[l], s->stream[l]));
    CHECK_NCCL(ncclGroupEnd());
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaStreamSynchronize(s->stream[l]));
        CHECK_CUDA(cudaMemcpy(b.host[l], b.dev[l], sizeof(int64_t), cudaMemcpyDeviceToHost));
        int64_t want = 0;
        for (int r = s->rank[l] % 2; r < s->nranks; r += 2)
            want += r;
        CHECK(((int64_t *)b.host[l])[0] == want, "split allreduce: rank %d got %lld want %lld",
              s->rank[l], (long long)((int64_t *)b.host[l])[0], (long long)want);
        CHECK_NCCL(ncclCommDestroy(child.comm[l]));
    }
    bufs_free(s, &b);
}

/* Shrink away rank 0: the others renumber down by one and still reduce.
 * Rank 0 takes no part, as NCCL requires of excluded ranks. */
static void test_shrink(struct suite *s)
{
    ncclComm_t child[SUITE_MAX] = {0};
    int excluded[1] = {0};
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++)
        if (s->rank[l] != 0)
            CHECK_NCCL(
                ncclCommShrink(s->comm[l], excluded, 1, &child[l], NULL, NCCL_SHRINK_DEFAULT));
    CHECK_NCCL(ncclGroupEnd());
    struct bufs b;
    bufs_alloc(s, &b, sizeof(int32_t));
    CHECK_NCCL(ncclGroupStart());
    for (int l = 0; l < s->nlocal; l++) {
        if (s->rank[l] == 0) continue;
        int count, rank;
        CHECK_NCCL(ncclCommCount(child[l], &count));
        CHECK_NCCL(ncclCommUserRank(child[l], &rank));
        CHECK(count == s->nranks - 1 && rank == s->rank[l] - 1, "shrink: rank %d became %d/%d",
              s->rank[l], rank, count);
        ((int32_t *)b.host[l])[0] = s->rank[l];
        CHECK_CUDA(cudaMemcpy(b.dev[l], b.host[l], sizeof(int32_t), cudaMemcpyHostToDevice));
        CHECK_NCCL(
            ncclAllReduce(b.dev[l], b.dev[l], 1, ncclInt32, ncclSum, child[l], s->stream[l]));
    }
    CHECK_NCCL(ncclGroupEnd());
    for (int l = 0; l < s->nlocal; l++) {
        if (s->rank[l] == 0) continue;
        CHECK_CUDA(cudaStreamSynchronize(s->stream[l]));
        CHECK_CUDA(cudaMemcpy(b.host[l], b.dev[l], sizeof(int32_t), cudaMemcpyDeviceToHost));
        int want = s->nranks * (s->nranks - 1) / 2;
        CHECK(((int32_t *)b.host[l])[0] == want, "shrink allreduce: rank %d got %d want %d",
              s->rank[l], ((int32_t *)b.host[l])[0], want);
        CHECK_NCCL(ncclCommDestroy(child[l]));
    }
    bufs_free(s, &b);
}

/* One communicator on two streams: in one group (the streams are joined)
 * and in two separate calls (the second waits its turn in issue order). */
static void test_two_streams(struct suite *s)
{
    const size_t count = 4096;
    size_t es = sizeof(float);
    cudaStream_t other[SUITE_MAX];
    struct bufs a, b;
    bufs_alloc(s, &a, count * es);
    bufs_alloc(s, &b, count * es);
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaSetDevice(dev_of(s, l)));
        CHECK_CUDA(cudaStreamCreateWithFlags(&other[l], cudaStreamNonBlocking));
        fill(ncclFloat, a.host[l], s->rank[l], count, 0, big_val);
        fill(ncclFloat, b.host[l], s->rank[l], count, 0, big_val);
    }
    bufs_upload(s, &a, count * es);
    bufs_upload(s, &b, count * es);
    for (int grouped = 1; grouped >= 0; grouped--) {
        if (grouped) CHECK_NCCL(ncclGroupStart());
        for (int l = 0; l < s->nlocal; l++) {
            if (!grouped) CHECK_NCCL(ncclGroupStart());
            CHECK_NCCL(ncclAllReduce(a.dev[l], a.dev[l], count, ncclFloat, ncclMax, s->comm[l],
                                     s->stream[l]));
            if (!grouped) {
                CHECK_NCCL(ncclGroupEnd());
                CHECK_NCCL(ncclGroupStart());
            }
            CHECK_NCCL(ncclBcast(b.dev[l], count, ncclFloat, 0, s->comm[l], other[l]));
            if (!grouped) CHECK_NCCL(ncclGroupEnd());
        }
        if (grouped) CHECK_NCCL(ncclGroupEnd());
    }
    for (int l = 0; l < s->nlocal; l++)
        CHECK_CUDA(cudaStreamSynchronize(other[l]));
    bufs_download(s, &a, count * es);
    for (int l = 0; l < s->nlocal; l++) {
        CHECK_CUDA(cudaMemcpy(b.host[l], b.dev[l], count * es, cudaMemcpyDeviceToHost));
        for (size_t i = 0; i < count; i++) {
            expect(ncclFloat, a.host[l], i, big_val(s->nranks - 1, i), "two-streams max",
                   s->rank[l]);
            expect(ncclFloat, b.host[l], i, big_val(0, i), "two-streams bcast", s->rank[l]);
        }
        CHECK_CUDA(cudaStreamDestroy(other[l]));
    }
    bufs_free(s, &a);
    bufs_free(s, &b);
}

/* Registration is bookkeeping: handles come back and go away once. */
static void test_register(struct suite *s)
{
    for (int l = 0; l < s->nlocal; l++) {
        void *buf, *handle;
        ncclWindow_t win;
        CHECK_NCCL(ncclMemAlloc(&buf, 1 << 16));
        CHECK_NCCL(ncclCommRegister(s->comm[l], buf, 1 << 16, &handle));
        CHECK_NCCL(ncclCommWindowRegister(s->comm[l], buf, 1 << 16, &win, NCCL_WIN_DEFAULT));
        CHECK_NCCL(ncclCommDeregister(s->comm[l], handle));
        CHECK(ncclCommDeregister(s->comm[l], handle) == ncclInvalidArgument, "double deregister");
        CHECK_NCCL(ncclCommWindowDeregister(s->comm[l], win));
        CHECK_NCCL(ncclMemFree(buf));
    }
}

void suite_run(struct suite *s)
{
    test_allgather(s, 1000, 0);
    test_allgather(s, 300000, 0);
    test_allgather(s, 300000, 1);
    test_reducescatter(s, 1000, 0);
    test_reducescatter(s, 100000, 1);
    test_allreduce_types(s);
    test_allreduce_inplace_big(s);
    test_premulsum(s);
    test_broadcast(s, 300000, 2 % s->nranks, 0);
    test_broadcast(s, 1000, 1 % s->nranks, 1);
    test_rooted_and_alltoall(s);
    test_sendrecv_ring(s);
    test_two_streams(s);
    test_split(s);
    test_shrink(s);
    test_register(s);
}
