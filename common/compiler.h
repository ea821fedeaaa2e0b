/* compiler.h - the compiler's hints every part of the product's C code
 * uses alike: branch expectations for hot paths, and per-thread state.
 *
 * FS_TLS is STYLE's per-thread state: initial-exec TLS, which the code
 * reaches at a fixed offset from the thread pointer, with no call of the
 * loader's on each access. libfsdpshim.so's TLS block is static anyway
 * (the allocator's last-pool cache has been initial-exec from the start),
 * so a dlopen of it (fsdpshim attach) needs no more room for these. */
#ifndef FS_COMPILER_H
#define FS_COMPILER_H

#define fs_likely(x)   __builtin_expect(!!(x), 1)
#define fs_unlikely(x) __builtin_expect(!!(x), 0)
#define FS_TLS         _Thread_local __attribute__((tls_model("initial-exec")))

#endif /* FS_COMPILER_H */
