/* ipc.c - CUDA IPC between two processes: memory and event handles.
 *
 * The test forks and execs itself as a second process ("child ROLE IN OUT",
 * IN and OUT the pipe fds it reads from and writes to), so the importer
 * shares nothing with the exporter but the 64-byte handles sent over the
 * pipe. What it asserts: data written through one process's pointer is read
 * through the other's, both ways; a record in one process orders a stream,
 * a query and a synchronise in the other, both ways; the handle names the
 * whole allocation (the base is returned) and opening it twice counts; and
 * the documented errors, including a handle opened in its own process, a
 * destroyed event and an exporter that has exited. Under FSDPSHIM_SIM_DATA=0
 * (sim_ipc_dry) everything but the data holds and is checked. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "require_device.h"

#define SIZE   ((size_t)1 << 20)
#define OFFSET ((size_t)8192)

/* What the exporter sends. */
struct offer {
    cudaIpcMemHandle_t mem;
    cudaIpcEventHandle_t ev;
    cudaIpcEventHandle_t dead_ev; /* of an event already destroyed */
};

static int moves_data(void)
{
    const char *e = getenv("FSDPSHIM_SIM_DATA");
    return !(e && strcmp(e, "0") == 0);
}

static int all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != v) return 0;
    return 1;
}

static void put(int fd, const void *p, size_t n)
{
    if (write(fd, p, n) != (ssize_t)n) {
        perror("ipc: write");
        exit(90);
    }
}

static void get(int fd, void *p, size_t n)
{
    if (read(fd, p, n) != (ssize_t)n) {
        perror("ipc: read");
        exit(91);
    }
}

static void put_byte(int fd, char c)
{
    put(fd, &c, 1);
}

static char get_byte(int fd)
{
    char c;
    get(fd, &c, 1);
    return c;
}

/* ---- the second process ---- */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "ipc child: line %d: %s\n", __LINE__, #cond);                          \
            exit(__LINE__ % 200 + 1);                                                              \
        }                                                                                          \
    } while (0)

/* A host function that holds its stream until the parent sends 'G'. */
static void CUDART_CB wait_for_go(void *p)
{
    if (get_byte(*(int *)p) != 'G') exit(92);
}

/* Imports the parent's memory and event, and checks them both ways. */
static int child_import(int in, int out)
{
    struct offer o;
    get(in, &o, sizeof o);
    void *base, *again;
    CHECK(cudaIpcOpenMemHandle(&base, o.mem, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess);
    CHECK(cudaIpcOpenMemHandle(&again, o.mem, 0) == cudaSuccess && again == base);
    CHECK(cudaIpcCloseMemHandle(again) == cudaSuccess);

    /* It is device memory of the allocation's extent, not this process's to free. */
    struct cudaPointerAttributes attr;
    CHECK(cudaPointerGetAttributes(&attr, base) == cudaSuccess &&
          attr.type == cudaMemoryTypeDevice && attr.device == 0);
    CHECK(cudaFree(base) == cudaErrorInvalidValue);
    static unsigned char host[SIZE + 1];
    CHECK(cudaMemcpy(host, base, SIZE + 1, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
    (void)cudaGetLastError();

    /* The parent's bytes, at the offset it handed out; then ours for it. */
    memset(host, 0, SIZE);
    CHECK(cudaMemcpy(host, (char *)base + OFFSET, 4096, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(!moves_data() || all_bytes(host, 4096, 0x11));
    CHECK(cudaMemset(base, 0x22, SIZE) == cudaSuccess && cudaDeviceSynchronize() == cudaSuccess);
    put_byte(out, 'A');

    /* Our record, held back until the parent says go, orders the parent. */
    cudaEvent_t ev;
    cudaStream_t s;
    float ms;
    CHECK(cudaIpcOpenEventHandle(&ev, o.ev) == cudaSuccess);
    CHECK(cudaEventElapsedTime(&ms, ev, ev) == cudaErrorInvalidResourceHandle);
    CHECK(cudaStreamCreate(&s) == cudaSuccess);
    CHECK(cudaLaunchHostFunc(s, wait_for_go, &in) == cudaSuccess);
    CHECK(cudaMemsetAsync(base, 0x33, SIZE, s) == cudaSuccess);
    CHECK(cudaEventRecord(ev, s) == cudaSuccess);
    put_byte(out, 'R');
    CHECK(cudaStreamSynchronize(s) == cudaSuccess);

    /* The parent's record orders our query and synchronise. */
    CHECK(get_byte(in) == 'P');
    CHECK(cudaEventQuery(ev) == cudaErrorNotReady);
    put_byte(out, 'Q');
    CHECK(cudaEventSynchronize(ev) == cudaSuccess);
    CHECK(cudaEventQuery(ev) == cudaSuccess);
    put_byte(out, 'S');

    CHECK(cudaEventDestroy(ev) == cudaSuccess && cudaStreamDestroy(s) == cudaSuccess);
    CHECK(cudaIpcCloseMemHandle(base) == cudaSuccess);
    CHECK(cudaIpcCloseMemHandle(base) == cudaErrorInvalidValue);
    return 0;
}

/* Exports memory and events, waits for the parent's 'X', then exits. */
static int child_export(int in, int out)
{
    struct offer o;
    void *p;
    cudaEvent_t ev, dead;
    unsigned flags = cudaEventDisableTiming | cudaEventInterprocess;
    CHECK(cudaMalloc(&p, SIZE) == cudaSuccess && cudaMemset(p, 0x44, SIZE) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaIpcGetMemHandle(&o.mem, p) == cudaSuccess);
    CHECK(cudaEventCreateWithFlags(&ev, flags) == cudaSuccess);
    CHECK(cudaIpcGetEventHandle(&o.ev, ev) == cudaSuccess);
    CHECK(cudaEventCreateWithFlags(&dead, flags) == cudaSuccess);
    CHECK(cudaIpcGetEventHandle(&o.dead_ev, dead) == cudaSuccess);
    CHECK(cudaEventDestroy(dead) == cudaSuccess);
    put(out, &o, sizeof o);
    CHECK(get_byte(in) == 'X');
    return 0;
}

static pid_t spawn(const char *role, int *to_child, int *from_child)
{
    int down[2], up[2];
    assert_int_equal(pipe(down), 0);
    assert_int_equal(pipe(up), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char in[16], out[16];
        snprintf(in, sizeof in, "%d", down[0]);
        snprintf(out, sizeof out, "%d", up[1]);
        close(down[1]);
        close(up[0]);
        execl("/proc/self/exe", "sim_ipc", "child", role, in, out, (char *)NULL);
        _exit(93);
    }
    close(down[0]);
    close(up[1]);
    *to_child = down[1];
    *from_child = up[0];
    return pid;
}

static void reap(pid_t pid)
{
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the tests, in the first process ---- */

static void test_parent_exports(void **state)
{
    (void)state;
    void *p, *q;
    cudaIpcMemHandle_t h, h_inner, h_other;
    cudaEvent_t ev;
    cudaStream_t s;
    struct offer o;
    memset(&o, 0, sizeof o);
    assert_int_equal(cudaMalloc(&p, SIZE), cudaSuccess);
    assert_int_equal(cudaMemset(p, 0x11, SIZE), cudaSuccess);
    assert_int_equal(cudaDeviceSynchronize(), cudaSuccess);
    /* The handle names the allocation, whichever pointer into it made it,
     * and the same allocation always gets the same handle; another
     * allocation gets another. */
    assert_int_equal(cudaIpcGetMemHandle(&h, p), cudaSuccess);
    assert_int_equal(cudaIpcGetMemHandle(&h_inner, (char *)p + OFFSET), cudaSuccess);
    assert_memory_equal(&h, &h_inner, sizeof h);
    assert_int_equal(cudaMalloc(&q, SIZE), cudaSuccess);
    assert_int_equal(cudaIpcGetMemHandle(&h_other, q), cudaSuccess);
    assert_memory_not_equal(&h, &h_other, sizeof h);
    assert_int_equal(cudaFree(q), cudaSuccess);
    o.mem = h_inner;
    assert_int_equal(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess),
                     cudaSuccess);
    assert_int_equal(cudaIpcGetEventHandle(&o.ev, ev), cudaSuccess);
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    unsigned char *host;
    assert_int_equal(cudaMallocHost((void **)&host, SIZE), cudaSuccess);

    int to, from;
    pid_t pid = spawn("import", &to, &from);
    put(to, &o, sizeof o);

    /* The child's write through its own pointer. */
    assert_int_equal(get_byte(from), 'A');
    assert_int_equal(cudaMemcpy(host, p, SIZE, cudaMemcpyDeviceToHost), cudaSuccess);
    assert_true(!moves_data() || all_bytes(host, SIZE, 0x22));

    /* The child recorded on a stream it holds back: not complete here,
     * and our stream waits for it. */
    assert_int_equal(get_byte(from), 'R');
    assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady);
    assert_int_equal(cudaStreamWaitEvent(s, ev, 0), cudaSuccess);
    assert_int_equal(cudaMemcpyAsync(host, p, SIZE, cudaMemcpyDeviceToHost, s), cudaSuccess);
    fs_test_sleep_ms(50);
    assert_int_equal(cudaStreamQuery(s), cudaErrorNotReady);
    put_byte(to, 'G');
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_true(!moves_data() || all_bytes(host, SIZE, 0x33));
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);

    /* Our record, held back by a gate, orders the child's query and
     * synchronise. */
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
    put_byte(to, 'P');
    assert_int_equal(get_byte(from), 'Q');
    fs_gate_open(&gate);
    assert_int_equal(get_byte(from), 'S');
    assert_int_equal(cudaStreamSynchronize(s), cudaSuccess);
    assert_false(gate.timed_out);
    reap(pid);

    close(to);
    close(from);
    assert_int_equal(cudaFreeHost(host), cudaSuccess);
    assert_int_equal(cudaEventDestroy(ev), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    assert_int_equal(cudaFree(p), cudaSuccess);
}

static void test_parent_imports(void **state)
{
    (void)state;
    int to, from;
    struct offer o;
    void *base;
    cudaEvent_t ev;
    pid_t pid = spawn("export", &to, &from);
    get(from, &o, sizeof o);

    /* A handle of an event its process destroyed names nothing. */
    assert_int_equal(cudaIpcOpenEventHandle(&ev, o.dead_ev), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);
    assert_int_equal(cudaIpcOpenEventHandle(&ev, o.ev), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess); /* never recorded */
    assert_int_equal(cudaEventDestroy(ev), cudaSuccess);

    assert_int_equal(cudaIpcOpenMemHandle(&base, o.mem, cudaIpcMemLazyEnablePeerAccess),
                     cudaSuccess);
    unsigned char host[4096];
    assert_int_equal(
        cudaMemcpy(host, (char *)base + SIZE - sizeof host, sizeof host, cudaMemcpyDeviceToHost),
        cudaSuccess);
    assert_true(!moves_data() || all_bytes(host, sizeof host, 0x44));
    assert_int_equal(cudaIpcCloseMemHandle(base), cudaSuccess);

    /* Once the exporter has exited, its handles name nothing. */
    put_byte(to, 'X');
    reap(pid);
    close(to);
    close(from);
    assert_int_equal(cudaIpcOpenMemHandle(&base, o.mem, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaIpcOpenEventHandle(&ev, o.ev), cudaErrorMapBufferObjectFailed);
    (void)cudaGetLastError();
}

/* Handles opened in the process that made them, bad arguments, memory and
 * events that cannot be exported. */
static void test_errors_in_one_process(void **state)
{
    (void)state;
    void *p, *pool_block, *pinned;
    cudaIpcMemHandle_t h, zero_mem;
    cudaIpcEventHandle_t eh, zero_ev;
    cudaEvent_t ev, plain, opened;
    memset(&zero_mem, 0, sizeof zero_mem);
    memset(&zero_ev, 0, sizeof zero_ev);
    assert_int_equal(cudaMalloc(&p, 4096), cudaSuccess);
    assert_int_equal(cudaIpcGetMemHandle(&h, p), cudaSuccess);

    assert_int_equal(cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorDeviceUninitialized);
    assert_int_equal(cudaGetLastError(), cudaErrorDeviceUninitialized);
    assert_int_equal(cudaIpcOpenMemHandle(&p, zero_mem, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaIpcOpenMemHandle(&p, h, 2), cudaErrorInvalidValue);
    assert_int_equal(cudaIpcOpenMemHandle(NULL, h, cudaIpcMemLazyEnablePeerAccess),
                     cudaErrorInvalidValue);
    assert_int_equal(cudaIpcCloseMemHandle(p), cudaErrorInvalidValue);

    /* Only cudaMalloc memory is exported: not host memory, pinned memory,
     * a pool block, a freed allocation. */
    int local;
    assert_int_equal(cudaIpcGetMemHandle(NULL, p), cudaErrorInvalidValue);
    assert_int_equal(cudaIpcGetMemHandle(&h, NULL), cudaErrorInvalidValue);
    assert_int_equal(cudaIpcGetMemHandle(&h, &local), cudaErrorInvalidValue);
    assert_int_equal(cudaMallocHost(&pinned, 4096), cudaSuccess);
    assert_int_equal(cudaIpcGetMemHandle(&h, pinned), cudaErrorInvalidValue);
    assert_int_equal(cudaFreeHost(pinned), cudaSuccess);
    assert_int_equal(cudaMallocAsync(&pool_block, 4096, 0), cudaSuccess);
    assert_int_equal(cudaIpcGetMemHandle(&h, pool_block), cudaErrorInvalidValue);
    assert_int_equal(cudaFreeAsync(pool_block, 0), cudaSuccess);
    assert_int_equal(cudaFree(p), cudaSuccess);
    assert_int_equal(cudaIpcGetMemHandle(&h, p), cudaErrorInvalidValue);
    assert_int_equal(cudaGetLastError(), cudaErrorInvalidValue);

    /* Events: only interprocess ones (which need cudaEventDisableTiming). */
    assert_int_equal(cudaEventCreateWithFlags(&ev, cudaEventInterprocess), cudaErrorInvalidValue);
    assert_int_equal(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming | cudaEventInterprocess),
                     cudaSuccess);
    assert_int_equal(cudaEventCreate(&plain), cudaSuccess);
    assert_int_equal(cudaIpcGetEventHandle(&eh, plain), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaIpcGetEventHandle(NULL, ev), cudaErrorInvalidValue);
    assert_int_equal(cudaIpcGetEventHandle(&eh, ev), cudaSuccess);
    assert_int_equal(cudaIpcOpenEventHandle(&opened, eh), cudaErrorDeviceUninitialized);
    assert_int_equal(cudaIpcOpenEventHandle(&opened, zero_ev), cudaErrorInvalidValue);
    assert_int_equal(cudaIpcOpenEventHandle(NULL, eh), cudaErrorInvalidValue);
    /* A memory handle is not an event handle. */
    memcpy(&zero_ev, &h, sizeof zero_ev);
    assert_int_equal(cudaIpcOpenEventHandle(&opened, zero_ev), cudaErrorInvalidValue);

    /* Within the process an interprocess event orders as any event. */
    cudaStream_t s;
    struct fs_gate gate = FS_GATE_INIT;
    assert_int_equal(cudaStreamCreate(&s), cudaSuccess);
    assert_int_equal(cudaLaunchHostFunc(s, fs_gate_wait, &gate), cudaSuccess);
    assert_int_equal(cudaEventRecord(ev, s), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaErrorNotReady);
    fs_gate_open(&gate);
    assert_int_equal(cudaEventSynchronize(ev), cudaSuccess);
    assert_int_equal(cudaEventQuery(ev), cudaSuccess);

    assert_int_equal(cudaEventDestroy(ev), cudaSuccess);
    assert_int_equal(cudaIpcGetEventHandle(&eh, ev), cudaErrorInvalidResourceHandle);
    assert_int_equal(cudaEventDestroy(plain), cudaSuccess);
    assert_int_equal(cudaStreamDestroy(s), cudaSuccess);
    (void)cudaGetLastError();
}

/* Sim-only: a forked child's inherited memory is its private copy, which
 * no other process can map. */
static void test_forked_child_cannot_export(void **state)
{
    (void)state;
    void *p;
    assert_int_equal(cudaMalloc(&p, 4096), cudaSuccess);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        cudaIpcMemHandle_t h;
        void *mine;
        if (cudaIpcGetMemHandle(&h, p) != cudaErrorNotSupported) _exit(1);
        if (cudaMalloc(&mine, 4096) || cudaIpcGetMemHandle(&h, mine)) _exit(2);
        _exit(0);
    }
    reap(pid);
    assert_int_equal(cudaFree(p), cudaSuccess);
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "child") == 0) {
        int in = atoi(argv[3]), out = atoi(argv[4]);
        if (strcmp(argv[2], "import") == 0) return child_import(in, out);
        if (strcmp(argv[2], "export") == 0) return child_export(in, out);
        return 94;
    }
    fs_test_require_device();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parent_exports),
        cmocka_unit_test(test_parent_imports),
        cmocka_unit_test(test_errors_in_one_process),
        cmocka_unit_test(test_forked_child_cannot_export),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
