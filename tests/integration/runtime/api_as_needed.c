/* api_as_needed.c - a program linked `-Wl,--as-needed -lfsdpshim -lcudart`
 * that calls only entry points the shim defines: the linker drops
 * libcudart, so the shim receives the calls but has no runtime to forward
 * them to. Every call fails with cudaErrorInitializationError, and the test
 * (expect_stderr.sh) wants one line on stderr saying why. */
#include "probe.h"

#include <link.h>
#include <string.h>

static int find_cudart(struct dl_phdr_info *info, size_t size, void *found)
{
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) *(int *)found = 1;
    return 0;
}

int main(void)
{
    int cudart_loaded = 0;
    void *p = NULL;

    watchdog(30);
    dl_iterate_phdr(find_cudart, &cudart_loaded);
    if (cudart_loaded) {
        fprintf(stderr, "api_as_needed: libcudart is loaded; the link did not drop it\n");
        return 1;
    }
    EXPECT(cudaMalloc(&p, 1 << 20) == cudaErrorInitializationError && p == NULL);
    EXPECT(cudaMalloc(&p, 1 << 20) == cudaErrorInitializationError && p == NULL);
    EXPECT(cudaFree(NULL) == cudaErrorInitializationError);
    printf("api_as_needed: ok\n");
    return 0;
}
