/* py_nest.c - a C function that calls back into Python, for the Python
 * frames test (py_alloc.py). Called through ctypes.CDLL, which lets the GIL
 * go, it runs a Python callback (which takes the GIL back, and lets it go
 * again around its own CDLL call), then allocates: that allocation belongs
 * to the outer call, made after an inner release and acquire. It knows
 * nothing of the shim. (The project builds with hidden visibility: the
 * function is exported by hand.) */
#include <stddef.h>

typedef int (*alloc_fn)(void **p, size_t size);

__attribute__((visibility("default"))) int call_then_alloc(void (*callback)(void), alloc_fn alloc,
                                                           void **p, size_t size)
{
    callback();
    return alloc(p, size);
}
