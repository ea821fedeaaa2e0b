/* minifsdp.c - a small FSDP-style training loop over CUDA and NCCL.
 *
 * An ordinary host program: it knows nothing of fsdpshim and launches no
 * kernels (copies, memsets and host functions stand in for compute), so it
 * runs unchanged on a GPU and on the simulated device. It is the demo's
 * workload and the shim's main integration test.
 *
 * Every rank holds a shard of each layer's flat parameter. Per step:
 *   forward   per layer: allocate the unsharded parameter on the "unshard"
 *             stream, all-gather it there, use it on the compute stream
 *             (after an event wait), then free it (reshard) on the unshard
 *             stream once the compute stream's use is ordered before it;
 *   backward  per layer, last first: all-gather again, produce the
 *             gradient (deterministic values) on the compute stream,
 *             reduce-scatter it on the post-backward stream, free both;
 *   optimizer update each shard on its host copy and upload it.
 * Every value is checked against a host-side reference each step; any
 * mismatch makes the program exit non-zero. Each rank prints one line.
 *
 * Ranks are processes forked before any CUDA call (rank r uses device r) or,
 * with --threads, threads of one process sharing ncclCommInitAll's
 * communicators. Exit status: 0 all ranks verified, 1 a failure, 2 usage,
 * 77 no CUDA device (so a GPU-only test can report a skip). */
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define EXIT_SKIP 77

struct options {
    int ranks, layers, steps, threads, use_malloc;
    size_t numel;
};

static struct options opt = {.ranks = 4, .layers = 6, .steps = 3, .numel = 100000};

/* The learning rate is a power of two so the host reference and the
 * program compute bit-identical floats. */
static const float lr = 1.0f / 64;

/* One rank's state. Shards are padded so every rank's shard is equal. */
struct rank {
    int rank, device;
    ncclComm_t comm;
    cudaStream_t compute, unshard, post;
    size_t shard, padded;         /* elements */
    float **param_shard;          /* device, per layer */
    float **grad_shard;           /* device, per layer */
    float **master;               /* host copy of this rank's shards, per layer */
    float **ref;                  /* host reference of every full parameter, per layer */
    float **seen_fwd, **seen_bwd; /* pinned: what the compute stream saw, per layer */
    float **grad_out;             /* pinned: reduce-scattered gradient shard, per layer */
    float *grad_in;               /* pinned: this rank's gradient for a layer */
    cudaEvent_t *gathered, *used, *grad_ready;
    int host_fn_calls; /* counted by a host function per layer use */
    char error[256];
};

static int fail(struct rank *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct rank *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
    return 1;
}

#define CUDA(call)                                                                                 \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) return fail(r, "%s: %s", #call, cudaGetErrorString(e_));            \
    } while (0)

#define NCCL(call)                                                                                 \
    do {                                                                                           \
        ncclResult_t n_ = (call);                                                                  \
        if (n_ != ncclSuccess)                                                                     \
            return fail(r, "%s: %s (%s)", #call, ncclGetErrorString(n_),                           \
                        ncclGetLastError(r->comm));                                                \
    } while (0)

/* Initial parameter value of element i of layer l (exact in float). */
static float param0(int l, size_t i)
{
    return i < opt.numel ? (float)((int)(i % 1000) - 500 + 7 * l) / 8 : 0.0f;
}

/* Rank r's gradient of element i of layer l at step s: small integers, so
 * sums over ranks are exact; zero in the padding. */
static float grad_of(int r, int s, int l, size_t i)
{
    return i < opt.numel ? (float)((r + 1) * (int)(i % 7 + 1) - 3 * s + l) : 0.0f;
}

static void CUDART_CB count_use(void *arg)
{
    atomic_fetch_add((_Atomic int *)arg, 1);
}

static int alloc_full(struct rank *r, void **p, size_t bytes, cudaStream_t s)
{
    if (opt.use_malloc)
        CUDA(cudaMalloc(p, bytes));
    else
        CUDA(cudaMallocAsync(p, bytes, s));
    return 0;
}

/* Frees a buffer last used on `user`, from stream `owner`: the free is
 * ordered after the use (stream-ordered free, or cudaFree's device sync). */
static int free_full(struct rank *r, void *p, cudaStream_t owner, cudaEvent_t used)
{
    if (opt.use_malloc) {
        CUDA(cudaFree(p));
        return 0;
    }
    CUDA(cudaStreamWaitEvent(owner, used, 0));
    CUDA(cudaFreeAsync(p, owner));
    return 0;
}

static int setup(struct rank *r)
{
    int L = opt.layers, n = opt.ranks;
    r->shard = (opt.numel + (size_t)n - 1) / (size_t)n;
    r->padded = r->shard * (size_t)n;
    CUDA(cudaSetDevice(r->device));
    CUDA(cudaStreamCreateWithFlags(&r->compute, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&r->unshard, cudaStreamNonBlocking));
    CUDA(cudaStreamCreateWithFlags(&r->post, cudaStreamNonBlocking));
#define TABLE(p) ((p) = calloc((size_t)L, sizeof(*(p)))) == NULL
    if (TABLE(r->param_shard) || TABLE(r->grad_shard) || TABLE(r->master) || TABLE(r->ref) ||
        TABLE(r->seen_fwd) || TABLE(r->seen_bwd) || TABLE(r->grad_out) || TABLE(r->gathered) ||
        TABLE(r->used) || TABLE(r->grad_ready))
        return fail(r, "out of host memory");
#undef TABLE
    size_t pb = r->padded * sizeof(float), sb = r->shard * sizeof(float);
    CUDA(cudaMallocHost((void **)&r->grad_in, pb));
    for (int l = 0; l < L; l++) {
        CUDA(cudaMalloc((void **)&r->param_shard[l], sb));
        CUDA(cudaMalloc((void **)&r->grad_shard[l], sb));
        CUDA(cudaMallocHost((void **)&r->seen_fwd[l], pb));
        CUDA(cudaMallocHost((void **)&r->seen_bwd[l], pb));
        CUDA(cudaMallocHost((void **)&r->grad_out[l], sb));
        CUDA(cudaEventCreateWithFlags(&r->gathered[l], cudaEventDisableTiming));
        CUDA(cudaEventCreateWithFlags(&r->used[l], cudaEventDisableTiming));
        CUDA(cudaEventCreateWithFlags(&r->grad_ready[l], cudaEventDisableTiming));
        r->master[l] = malloc(sb);
        r->ref[l] = malloc(pb);
        if (!r->master[l] || !r->ref[l]) return fail(r, "out of host memory");
        for (size_t i = 0; i < r->padded; i++)
            r->ref[l][i] = param0(l, i);
        memcpy(r->master[l], r->ref[l] + (size_t)r->rank * r->shard, sb);
        CUDA(cudaMemcpy(r->param_shard[l], r->master[l], sb, cudaMemcpyHostToDevice));
    }
    return 0;
}

/* Unshards layer l on the unshard stream; the compute stream waits for it. */
static int unshard(struct rank *r, int l, float **full)
{
    CUDA(cudaSetDevice(r->device));
    if (alloc_full(r, (void **)full, r->padded * sizeof(float), r->unshard)) return 1;
    NCCL(ncclAllGather(r->param_shard[l], *full, r->shard, ncclFloat, r->comm, r->unshard));
    CUDA(cudaEventRecord(r->gathered[l], r->unshard));
    CUDA(cudaStreamWaitEvent(r->compute, r->gathered[l], 0));
    return 0;
}

static int forward(struct rank *r)
{
    size_t pb = r->padded * sizeof(float);
    for (int l = 0; l < opt.layers; l++) {
        float *full;
        if (unshard(r, l, &full)) return 1;
        /* "Compute": read the whole parameter, and a host function as a kernel. */
        CUDA(cudaMemcpyAsync(r->seen_fwd[l], full, pb, cudaMemcpyDeviceToHost, r->compute));
        CUDA(cudaLaunchHostFunc(r->compute, count_use, &r->host_fn_calls));
        CUDA(cudaEventRecord(r->used[l], r->compute));
        if (free_full(r, full, r->unshard, r->used[l])) return 1;
    }
    return 0;
}

static int backward(struct rank *r, int step)
{
    size_t pb = r->padded * sizeof(float);
    for (int l = opt.layers - 1; l >= 0; l--) {
        float *full, *grad;
        if (unshard(r, l, &full)) return 1;
        CUDA(cudaMemcpyAsync(r->seen_bwd[l], full, pb, cudaMemcpyDeviceToHost, r->compute));
        CUDA(cudaLaunchHostFunc(r->compute, count_use, &r->host_fn_calls));
        /* The gradient: deterministic values, staged through pinned memory.
         * The staging buffer is reused per layer, so wait for its last copy. */
        CUDA(cudaStreamSynchronize(r->compute));
        for (size_t i = 0; i < r->padded; i++)
            r->grad_in[i] = grad_of(r->rank, step, l, i);
        if (alloc_full(r, (void **)&grad, pb, r->compute)) return 1;
        CUDA(cudaMemsetAsync(grad, 0, pb, r->compute));
        CUDA(cudaMemcpyAsync(grad, r->grad_in, pb, cudaMemcpyHostToDevice, r->compute));
        CUDA(cudaEventRecord(r->used[l], r->compute));
        if (free_full(r, full, r->unshard, r->used[l])) return 1;
        /* Reduce-scatter on the post-backward stream once the gradient exists. */
        CUDA(cudaEventRecord(r->grad_ready[l], r->compute));
        CUDA(cudaStreamWaitEvent(r->post, r->grad_ready[l], 0));
        NCCL(ncclReduceScatter(grad, r->grad_shard[l], r->shard, ncclFloat, ncclSum, r->comm,
                               r->post));
        CUDA(cudaMemcpyAsync(r->grad_out[l], r->grad_shard[l], r->shard * sizeof(float),
                             cudaMemcpyDeviceToHost, r->post));
        if (opt.use_malloc) {
            CUDA(cudaFree(grad));
        } else {
            CUDA(cudaFreeAsync(grad, r->post));
        }
    }
    return 0;
}

/* Checks what the streams saw, then steps the shards and the reference. */
static int verify_and_step(struct rank *r, int step)
{
    CUDA(cudaStreamSynchronize(r->compute));
    CUDA(cudaStreamSynchronize(r->unshard));
    CUDA(cudaStreamSynchronize(r->post));
    ncclResult_t async;
    NCCL(ncclCommGetAsyncError(r->comm, &async));
    if (async != ncclSuccess) return fail(r, "NCCL async error: %s", ncclGetErrorString(async));
    for (int l = 0; l < opt.layers; l++) {
        for (size_t i = 0; i < r->padded; i++) {
            if (r->seen_fwd[l][i] != r->ref[l][i] || r->seen_bwd[l][i] != r->ref[l][i])
                return fail(r, "step %d layer %d: unsharded param[%zu] = %g/%g, want %g", step, l,
                            i, (double)r->seen_fwd[l][i], (double)r->seen_bwd[l][i],
                            (double)r->ref[l][i]);
        }
        for (size_t j = 0; j < r->shard; j++) {
            size_t i = (size_t)r->rank * r->shard + j;
            float want = 0;
            for (int q = 0; q < opt.ranks; q++)
                want += grad_of(q, step, l, i);
            if (r->grad_out[l][j] != want)
                return fail(r, "step %d layer %d: grad shard[%zu] = %g, want %g", step, l, j,
                            (double)r->grad_out[l][j], (double)want);
            r->master[l][j] -= lr * r->grad_out[l][j];
        }
        /* The reference steps every element the same way. */
        for (size_t i = 0; i < r->padded; i++) {
            float g = 0;
            for (int q = 0; q < opt.ranks; q++)
                g += grad_of(q, step, l, i);
            r->ref[l][i] -= lr * g;
        }
        CUDA(cudaMemcpy(r->param_shard[l], r->master[l], r->shard * sizeof(float),
                        cudaMemcpyHostToDevice));
    }
    return 0;
}

static int train(struct rank *r)
{
    if (setup(r)) return 1;
    for (int step = 0; step < opt.steps; step++)
        if (forward(r) || backward(r, step) || verify_and_step(r, step)) return 1;
    CUDA(cudaDeviceSynchronize());
    if (r->host_fn_calls != 2 * opt.layers * opt.steps)
        return fail(r, "%d host functions ran, want %d", r->host_fn_calls,
                    2 * opt.layers * opt.steps);
    return 0;
}

/* Releases what setup made (whatever part of it succeeded). */
static void teardown(struct rank *r)
{
    cudaSetDevice(r->device);
    cudaDeviceSynchronize();
    for (int l = 0; l < opt.layers; l++) {
        if (r->param_shard && r->param_shard[l]) cudaFree(r->param_shard[l]);
        if (r->grad_shard && r->grad_shard[l]) cudaFree(r->grad_shard[l]);
        if (r->seen_fwd && r->seen_fwd[l]) cudaFreeHost(r->seen_fwd[l]);
        if (r->seen_bwd && r->seen_bwd[l]) cudaFreeHost(r->seen_bwd[l]);
        if (r->grad_out && r->grad_out[l]) cudaFreeHost(r->grad_out[l]);
        cudaEvent_t *events[] = {r->gathered, r->used, r->grad_ready};
        for (int e = 0; e < 3; e++)
            if (events[e] && events[e][l]) cudaEventDestroy(events[e][l]);
        if (r->master) free(r->master[l]);
        if (r->ref) free(r->ref[l]);
    }
    if (r->grad_in) cudaFreeHost(r->grad_in);
    cudaStream_t streams[] = {r->compute, r->unshard, r->post};
    for (int k = 0; k < 3; k++)
        if (streams[k]) cudaStreamDestroy(streams[k]);
    free(r->param_shard);
    free(r->grad_shard);
    free(r->master);
    free(r->ref);
    free(r->seen_fwd);
    free(r->seen_bwd);
    free(r->grad_out);
    free(r->gathered);
    free(r->used);
    free(r->grad_ready);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Runs one rank to completion and prints its line; returns its status. */
static int run_rank(struct rank *r)
{
    double t0 = now_ms();
    int rc = train(r);
    double checksum = 0;
    for (int l = 0; !rc && l < opt.layers; l++)
        for (size_t j = 0; j < r->shard; j++)
            checksum += r->master[l][j];
    if (rc)
        printf("minifsdp rank %d/%d (device %d): FAILED: %s\n", r->rank, opt.ranks, r->device,
               r->error);
    else
        printf("minifsdp rank %d/%d (device %d): ok: %d layers x %zu params, %d steps, "
               "shard checksum %.6f, %.1f ms\n",
               r->rank, opt.ranks, r->device, opt.layers, opt.numel, opt.steps, checksum,
               now_ms() - t0);
    fflush(stdout);
    teardown(r);
    if (r->comm) ncclCommDestroy(r->comm);
    return rc;
}

/* Device count check shared by both modes: 77 without a device, 1 when
 * there are fewer devices than ranks (one rank per device, as NCCL needs). */
static int check_devices(void)
{
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        fprintf(stderr, "minifsdp: no CUDA device available (%s); skipping\n",
                cudaGetErrorString(cudaGetLastError()));
        return EXIT_SKIP;
    }
    if (opt.ranks > count) {
        fprintf(stderr,
                "minifsdp: --ranks %d needs %d devices, only %d present (one rank per device)\n",
                opt.ranks, opt.ranks, count);
        return 1;
    }
    return 0;
}

/* ---- ranks as processes --------------------------------------------------- */

struct rendezvous {
    ncclUniqueId id;
    _Atomic int state; /* 0 waiting, 1 id ready, 2 rank 0 gave up */
};

static int process_rank(struct rendezvous *rv, int rank)
{
    struct rank r = {.rank = rank, .device = rank};
    if (rank == 0) {
        int rc = check_devices();
        ncclResult_t nr = rc ? ncclSuccess : ncclGetUniqueId(&rv->id);
        if (rc || nr != ncclSuccess) {
            atomic_store(&rv->state, 2);
            return rc ? rc : 1;
        }
        atomic_store(&rv->state, 1);
    } else {
        while (atomic_load(&rv->state) == 0)
            usleep(1000);
        if (atomic_load(&rv->state) == 2) return EXIT_SKIP; /* rank 0 reported why */
    }
    if (cudaSetDevice(rank) != cudaSuccess) {
        fprintf(stderr, "minifsdp rank %d: cudaSetDevice failed\n", rank);
        return 1;
    }
    ncclResult_t nr = ncclCommInitRank(&r.comm, opt.ranks, rv->id, rank);
    if (nr != ncclSuccess) {
        printf("minifsdp rank %d/%d: FAILED: ncclCommInitRank: %s (%s)\n", rank, opt.ranks,
               ncclGetErrorString(nr), ncclGetLastError(NULL));
        return 1;
    }
    return run_rank(&r);
}

static int run_processes(void)
{
    struct rendezvous *rv =
        mmap(NULL, sizeof(*rv), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (rv == MAP_FAILED) {
        perror("minifsdp: mmap");
        return 1;
    }
    pid_t pids[opt.ranks];
    for (int q = 0; q < opt.ranks; q++) {
        fflush(stdout);
        pids[q] = fork();
        if (pids[q] < 0) {
            perror("minifsdp: fork");
            return 1;
        }
        if (pids[q] == 0) {
            exit(process_rank(rv, q));
        }
    }
    int status = 0, skipped = 0;
    for (int q = 0; q < opt.ranks; q++) {
        int st;
        while (waitpid(pids[q], &st, 0) < 0 && errno == EINTR)
            ;
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (code == EXIT_SKIP)
            skipped++;
        else if (code != 0 && !status)
            status = code;
    }
    /* Ranks skip only when rank 0 found no device: then all did. */
    return !status && skipped ? EXIT_SKIP : status;
}

/* ---- ranks as threads --------------------------------------------------- */

static void *thread_rank(void *arg)
{
    struct rank *r = arg;
    return (void *)(intptr_t)run_rank(r);
}

static int run_threads(void)
{
    int rc = check_devices();
    if (rc) return rc;
    ncclComm_t comms[opt.ranks];
    ncclResult_t nr = ncclCommInitAll(comms, opt.ranks, NULL);
    if (nr != ncclSuccess) {
        fprintf(stderr, "minifsdp: ncclCommInitAll: %s (%s)\n", ncclGetErrorString(nr),
                ncclGetLastError(NULL));
        return 1;
    }
    struct rank *ranks = calloc((size_t)opt.ranks, sizeof(*ranks));
    pthread_t th[opt.ranks];
    if (!ranks) return 1;
    for (int q = 0; q < opt.ranks; q++) {
        ranks[q].rank = q;
        ranks[q].device = q;
        ranks[q].comm = comms[q];
        if (pthread_create(&th[q], NULL, thread_rank, &ranks[q]) != 0) {
            fprintf(stderr, "minifsdp: pthread_create failed\n");
            return 1;
        }
    }
    for (int q = 0; q < opt.ranks; q++) {
        void *ret;
        pthread_join(th[q], &ret);
        if (ret && !rc) rc = 1;
    }
    free(ranks);
    return rc;
}

static void usage(FILE *f, const char *argv0)
{
    fprintf(f,
            "usage: %s [options]\n"
            "An FSDP-style training loop over CUDA + NCCL that checks every value.\n"
            "  --ranks N    ranks, one per device (default %d); processes forked\n"
            "               before any CUDA call, rank r on device r\n"
            "  --threads    ranks as threads of one process (ncclCommInitAll)\n"
            "  --layers N   layers (default %d)\n"
            "  --numel N    parameters per layer (default %zu)\n"
            "  --steps N    training steps (default %d)\n"
            "  --malloc     cudaMalloc/cudaFree instead of cudaMallocAsync/cudaFreeAsync\n"
            "  --help       this text\n"
            "Exit status: 0 verified, 1 failure, 2 usage, 77 no CUDA device.\n",
            argv0, opt.ranks, opt.layers, opt.numel, opt.steps);
}

static int parse_count(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"ranks", required_argument, NULL, 'r'},  {"threads", no_argument, NULL, 't'},
        {"layers", required_argument, NULL, 'l'}, {"numel", required_argument, NULL, 'n'},
        {"steps", required_argument, NULL, 's'},  {"malloc", no_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0}};
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'r':
        case 'l':
        case 's':
        case 'n':
            if (parse_count(optarg, 1, c == 'n' ? (1L << 30) : 4096, &v) != 0) {
                fprintf(stderr, "minifsdp: bad value '%s' for --%s\n", optarg,
                        c == 'r'   ? "ranks"
                        : c == 'l' ? "layers"
                        : c == 's' ? "steps"
                                   : "numel");
                return 2;
            }
            if (c == 'r')
                opt.ranks = (int)v;
            else if (c == 'l')
                opt.layers = (int)v;
            else if (c == 's')
                opt.steps = (int)v;
            else
                opt.numel = (size_t)v;
            break;
        case 't':
            opt.threads = 1;
            break;
        case 'm':
            opt.use_malloc = 1;
            break;
        case 'h':
            usage(stdout, argv[0]);
            return 0;
        default:
            usage(stderr, argv[0]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "minifsdp: unexpected argument '%s'\n", argv[optind]);
        usage(stderr, argv[0]);
        return 2;
    }
    return opt.threads ? run_threads() : run_processes();
}
