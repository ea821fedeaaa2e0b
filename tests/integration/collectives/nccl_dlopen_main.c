/* nccl_dlopen_main.c - a program with neither CUDA nor NCCL linked in that
 * loads a CUDA + NCCL library with dlopen(RTLD_LOCAL), as Python does, and
 * runs its test (nccl_dlopen_plugin.c).
 *
 *   nccl_dlopen_main PLUGIN.so */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN.so\n", argv[0]);
        return 2;
    }
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    int (*run)(void) = (int (*)(void))dlsym(plugin, "coll_plugin_run");
    if (!run) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 1;
    }
    int failures = run();
    if (failures) return 1;
    printf("nccl_dlopen: NCCL loaded with RTLD_LOCAL reached through the shim\n");
    return 0;
}
