/* fold_prog.c - allocations under frames named as CPython names its eval
 * loop's, for the folding of plumbing frames (fold_test.sh): main calls
 * PyEval_EvalCode, which goes down through _PyEval_EvalFrameDefault,
 * _PyObject_MakeTpCall and cfunction_call to user_site, which allocates
 * (FOLD_SITE). The analyzer's commands must print those four frames as one
 * folded line, and every frame with --full-stacks. It knows nothing of the
 * shim; built without sibling-call optimisation so that every frame stays
 * on the stack.
 *
 *   fold_prog [keep]    keep: the first block is 5 MiB, not 3 MiB (a site that
 *                       grew, for diff), and the last is never freed (a leak) */
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "fold_prog: %s: %s\n", #x, cudaGetErrorString(e_));                    \
            return NULL;                                                                           \
        }                                                                                          \
    } while (0)

__attribute__((noinline)) static void *user_site(size_t n)
{
    void *p = NULL;
    CHECK(cudaMalloc(&p, n)); /* FOLD_SITE */
    return p;
}

/* the interpreter's frames, each calling the next */
__attribute__((noinline)) static void *cfunction_call(size_t n)
{
    return user_site(n);
}

__attribute__((noinline)) static void *_PyObject_MakeTpCall(size_t n)
{
    return cfunction_call(n);
}

__attribute__((noinline)) static void *_PyEval_EvalFrameDefault(size_t n)
{
    return _PyObject_MakeTpCall(n);
}

__attribute__((noinline)) static void *PyEval_EvalCode(size_t n)
{
    return _PyEval_EvalFrameDefault(n);
}

int main(int argc, char **argv)
{
    int keep = argc > 1 && !strcmp(argv[1], "keep");
    void *a = PyEval_EvalCode((keep ? 5u : 3u) << 20); /* FOLD_CALL */
    void *b = PyEval_EvalCode(1u << 20);               /* FOLD_CALL */
    if (!a || !b) return 1;
    if (cudaFree(a) != cudaSuccess) return 1;
    if (!keep && cudaFree(b) != cudaSuccess) return 1;
    printf("fold_prog: ok\n");
    return 0;
}
