/* fork.c - a child of fork starts with a clean shim: nothing of the
 * parent's cache (whose device memory means nothing in the child) is
 * visible or reused there. The child only reads statistics; it does no
 * device work, which CUDA does not support after fork. */
#include "probe.h"

#include <sys/wait.h>

int main(void)
{
    void *keep, *cached;
    int status;
    pid_t pid;

    watchdog(30);
    require_device();
    CHECK(cudaMalloc(&keep, 3 << 20));
    CHECK(cudaMalloc(&cached, 5 << 20));
    CHECK(cudaFree(cached));
    EXPECT(shim_stat("allocated_bytes.all.current", -1) >= 3 << 20);
    EXPECT(shim_stat("reserved_bytes.all.current", -1) >= 8 << 20);

    pid = fork();
    EXPECT(pid >= 0);
    if (pid == 0) {
        /* a fresh allocator: no segment, no block, no history (or, where
         * the runtime refuses to start in a forked child as on a GPU, no
         * active shim at all: -1) */
        if (shim_stat("reserved_bytes.all.current", -1) > 0 ||
            shim_stat("allocation.all.allocated", -1) > 0 ||
            shim_stat("segment.all.peak", -1) > 0) {
            fprintf(stderr, "fork: the child sees the parent's cache\n");
            _exit(1);
        }
        _exit(0);
    }
    EXPECT(waitpid(pid, &status, 0) == pid);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* the parent's state is untouched */
    EXPECT(shim_stat("allocated_bytes.all.current", -1) >= 3 << 20);
    CHECK(cudaFree(keep));
    printf("fork: ok\n");
    return 0;
}
