/* held_driver.c - a program that `fsdpshim attach` must trace through the
 * GOT slots: a CUPTI client holds CUPTI's one subscriber slot (as a profiler
 * would), and the program reaches the driver's memory calls by lookup, looked
 * up afresh for each allocation (as a library loaded later would):
 * cuMemAlloc_v2 from a cuGetProcAddress_v2 taken with dlsym on the driver's
 * handle, cuMemFree_v2 from the runtime's cudaGetDriverEntryPointByVersion.
 * It also allocates with NCCL's ncclMemAlloc.
 *
 *   held_driver loop FILE   allocates forever, 1 round per ms, writing after
 *                           each "COUNT HOOKED" to FILE: HOOKED is 1 when the
 *                           cuMemAlloc_v2 it was handed is not the driver's
 *                           own (the shim's, while attached), else 0 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void CUPTIAPI ignore(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                            const void *data)
{
    (void)userdata;
    (void)domain;
    (void)id;
    (void)data;
}

/* Whether `fn` is code of the driver library. */
static int in_driver(void *fn)
{
    Dl_info info;
    const char *base;

    if (!dladdr(fn, &info) || !info.dli_fname) return 0;
    base = strrchr(info.dli_fname, '/');
    return !strncmp(base ? base + 1 : info.dli_fname, "libcuda.so", 10);
}

static int round_trip(void *driver, int *hooked)
{
    __typeof__(&cuGetProcAddress_v2) proc =
        (__typeof__(&cuGetProcAddress_v2))dlsym(driver, "cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult found;
    enum cudaDriverEntryPointQueryResult status;
    __typeof__(&cuMemAlloc_v2) alloc;
    __typeof__(&cuMemFree_v2) release;
    CUdeviceptr p;
    void *q;

    if (!proc || proc("cuMemAlloc", (void **)&alloc, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) ||
        cudaGetDriverEntryPointByVersion("cuMemFree", (void **)&release, 12000, cudaEnableDefault,
                                         &status))
        return 1;
    *hooked = !in_driver((void *)alloc);
    if (alloc(&p, 12288) != CUDA_SUCCESS) return 1;       /* SITE_DRIVER */
    if (ncclMemAlloc(&q, 20480) != ncclSuccess) return 1; /* SITE_NCCL */
    if (ncclMemFree(q) != ncclSuccess) return 1;
    return release(p) != CUDA_SUCCESS;
}

int main(int argc, char **argv)
{
    CUpti_SubscriberHandle sub;
    void *driver;
    int fd;

    if (argc != 3 || strcmp(argv[1], "loop")) {
        fprintf(stderr, "usage: held_driver loop FILE\n");
        return 2;
    }
    if (cuptiSubscribe(&sub, ignore, NULL) != CUPTI_SUCCESS) {
        fprintf(stderr, "held_driver: cannot subscribe to CUPTI\n");
        return 1;
    }
    /* the runtime makes the device's primary context current */
    if (cudaSetDevice(0) != cudaSuccess || cudaFree(NULL) != cudaSuccess) return 1;
    driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!driver || fd < 0) {
        fprintf(stderr, "held_driver: %s\n", driver ? "cannot open FILE" : dlerror());
        return 1;
    }
    for (unsigned long long n = 1;; n++) {
        char line[48];
        int hooked = 0;
        if (round_trip(driver, &hooked)) {
            fprintf(stderr, "held_driver: round %llu failed\n", n);
            return 1;
        }
        int len = snprintf(line, sizeof line, "%020llu %d\n", n, hooked);
        if (pwrite(fd, line, (size_t)len, 0) != len) return 1;
        usleep(1000);
    }
}
