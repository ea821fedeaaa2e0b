/* dlsym.c - the shim's dlsym and dlvsym.
 *
 * NCCL, nvcc's static runtime and other programs reach the CUDA driver with
 * dlopen("libcuda.so.1") and dlsym, never through a symbol the loader binds.
 * A lookup of a driver entry point the shim hooks is answered by
 * cuda_driver.c, which may hand out the shim's hook instead of the driver's
 * function; one of a runtime or NCCL entry point on a library's handle (as
 * ctypes makes) by runtime/served_lookup.c, which hands out the shim's own
 * definition; every other lookup is the real dlsym's (core/real_loader.c),
 * made as if the program had called it. Where the shim is not preloaded,
 * `fsdpshim attach` points the program's slots of dlsym and dlvsym here
 * (attach/got.c).
 *
 * What makes this delicate (docs/interpose.md, "The driver API"):
 * - dlsym(RTLD_NEXT, name) means "the next definition after the caller's
 *   object", and the real dlsym finds its caller from its return address.
 *   A pass-through is therefore a tail call, which leaves the program's
 *   return address in place: the compiler is made to emit one at every
 *   optimisation level (FS_TAIL_CALLER), and a sanitizer's function-exit
 *   hook, which would have to follow the call, is left out.
 * - Sanitizer runtimes resolve their interceptors through this dlsym while
 *   they initialise (ASan before its shadow memory exists), and libraries
 *   probe symbols from constructors before the shim's own have run: the path
 *   of a lookup that is not a driver entry point is not instrumented, takes
 *   no lock, allocates nothing and calls nothing but the real function
 *   (FS_LOOKUP_PATH, core/real.h). */
#include "driver.h"
#include "../core/hooks.h"
#include "../core/real.h"
#include "../python/gil.h"

#include <dlfcn.h>

/* FS_TAIL_CALLER, FS_TAIL: a function whose `FS_TAIL return f(...)` must
 * be a tail call. GCC makes sibling calls from -O2 (and has no musttail
 * before GCC 15); clang is told. */
#if defined(__clang__)
#define FS_TAIL_CALLER FS_LOOKUP_PATH
#define FS_TAIL        __attribute__((musttail))
#else
#define FS_TAIL_CALLER FS_LOOKUP_PATH __attribute__((optimize("O2")))
#define FS_TAIL
#endif

FS_LOOKUP_PATH static bool has_prefix(const char *s, const char *prefix)
{
    while (*prefix && *s == *prefix)
        s++, prefix++;
    return !*prefix;
}

/* Whether `name` may be a driver entry point that cuda_driver.c answers
 * (it knows exactly which): the driver's memory calls and cuGetProcAddress. */
FS_LOOKUP_PATH static bool driver_name(const char *name)
{
    return has_prefix(name, "cuMem") || has_prefix(name, "cuGetProcAddress");
}

/* Whether `name` may be a runtime or NCCL entry point the shim defines
 * (runtime/served_lookup.c knows which): looked up on a library's own
 * handle, the shim's definition goes out, as the global scope gives. */
FS_LOOKUP_PATH static bool served_name(const char *name)
{
    return has_prefix(name, "cuda") || has_prefix(name, "nccl");
}

/* Whether `name` is an extension module's entry point: the interpreter
 * looks it up right after loading the module, whose slots of the GIL
 * functions may then need pointing at the shim's (python/gil.h). */
FS_LOOKUP_PATH static bool python_module_name(const char *name)
{
    return has_prefix(name, "PyInit_");
}

/* A lookup relative to the caller (RTLD_NEXT) is always the real one's: it
 * asks for the definition after the caller's own, which an interposer of
 * the driver wants and no hook is (the shim exports no driver names).
 * RTLD_DEFAULT searches the global scope, where a preloaded shim's
 * definitions come first already. */
FS_TAIL_CALLER void *fs_dlsym(void *handle, const char *name)
{
    fs_dlsym_fn real = fs_real_dlsym_fn();

    if (fs_unlikely(driver_name(name)) && handle != RTLD_NEXT)
        return fs_driver_dlsym(handle, name, NULL, __builtin_return_address(0));
    if (fs_unlikely(served_name(name)) && handle != RTLD_NEXT && handle != RTLD_DEFAULT)
        return fs_served_dlsym(handle, name, NULL, __builtin_return_address(0));
    if (fs_unlikely(python_module_name(name)) && handle != RTLD_NEXT && handle != RTLD_DEFAULT) {
        /* on a module's own handle the answer does not depend on the caller */
        void *fn = real(handle, name);
        fs_python_gil_loaded();
        return fn;
    }
    FS_TAIL return real(handle, name);
}
FS_HOOK_FN(FS_HOOK_DLSYM, NULL, fs_dlsym);

FS_TAIL_CALLER void *fs_dlvsym(void *handle, const char *name, const char *version)
{
    fs_dlvsym_fn real = fs_real_dlvsym_fn();

    if (fs_unlikely(driver_name(name)) && handle != RTLD_NEXT)
        return fs_driver_dlsym(handle, name, version, __builtin_return_address(0));
    if (fs_unlikely(served_name(name)) && handle != RTLD_NEXT && handle != RTLD_DEFAULT)
        return fs_served_dlsym(handle, name, version, __builtin_return_address(0));
    FS_TAIL return real(handle, name, version);
}
FS_HOOK_FN(FS_HOOK_DLVSYM, NULL, fs_dlvsym);

/* Exported as dlsym and dlvsym: the same functions under the C library's
 * names. The hook rows name them as fs_dlsym and fs_dlvsym, since
 * inside the shim a reference to an exported name binds to the first
 * definition in the global scope, which is the C library's where the shim
 * is not preloaded (`fsdpshim attach`). */
FS_EXPORT void *dlsym(void *handle, const char *name) __attribute__((alias("fs_dlsym")));
FS_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
    __attribute__((alias("fs_dlvsym")));
