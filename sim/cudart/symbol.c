/* symbol.c - __device__ and __constant__ variables seen from the host:
 * cudaGetSymbolAddress, cudaGetSymbolSize, cudaMemcpyToSymbol[Async],
 * cudaMemcpyFromSymbol[Async].
 *
 * A symbol is the address of a variable's host shadow, registered by
 * __cudaRegisterVar (registration.c, sim/core/modules.c). Its device copy lives in its module's
 * storage on the current device, made when the module is first used there.
 * Copies to and from it are ordinary copies (sim/core/copy_engine.c): same stream order,
 * same waits, same checks. */
#include "sim.h"

/* The device address of `symbol` on the current device and its size. */
static cudaError_t resolve(const void *symbol, char **addr, size_t *size)
{
    sim_init();
    struct sim_device *dev = sim_cur_dev();
    if (!dev) return cudaErrorNoDevice;
    sim_modules_rdlock();
    struct sim_var *v = sim_var_find(symbol);
    cudaError_t err = v ? sim_var_address(v, dev->ordinal, addr) : cudaErrorInvalidSymbol;
    if (v) *size = v->size;
    sim_modules_unlock();
    return err;
}

SIM_API cudaError_t cudaGetSymbolAddress(void **dev_ptr, const void *symbol)
{
    if (!dev_ptr) return sim_record_error(cudaErrorInvalidValue);
    char *addr;
    size_t size;
    cudaError_t err = resolve(symbol, &addr, &size);
    if (err) return sim_record_error(err);
    *dev_ptr = addr;
    return cudaSuccess;
}

SIM_API cudaError_t cudaGetSymbolSize(size_t *size, const void *symbol)
{
    if (!size) return sim_record_error(cudaErrorInvalidValue);
    char *addr;
    return sim_record_error(resolve(symbol, &addr, size));
}

enum dir { TO_SYMBOL, FROM_SYMBOL };

static cudaError_t symbol_copy(enum dir dir, void *mem, const void *symbol, size_t count,
                               size_t offset, enum cudaMemcpyKind kind, cudaStream_t s, int pt,
                               int async)
{
    /* The symbol's side is the device: only the other side is named. */
    int ok = kind == cudaMemcpyDeviceToDevice || kind == cudaMemcpyDefault ||
             kind == (dir == TO_SYMBOL ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
    if (!ok) return sim_record_error(cudaErrorInvalidMemcpyDirection);
    char *addr;
    size_t size;
    cudaError_t err = resolve(symbol, &addr, &size);
    if (err) return sim_record_error(err);
    if (offset > size || count > size - offset) return sim_record_error(cudaErrorInvalidValue);
    if (dir == TO_SYMBOL) return sim_memcpy(addr + offset, mem, count, kind, s, pt, async);
    return sim_memcpy(mem, addr + offset, count, kind, s, pt, async);
}

SIM_API cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count,
                                       size_t offset, enum cudaMemcpyKind kind)
{
    return symbol_copy(TO_SYMBOL, (void *)src, symbol, count, offset, kind, NULL, 0, 0);
}

SIM_API cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count,
                                            size_t offset, enum cudaMemcpyKind kind)
{
    return symbol_copy(TO_SYMBOL, (void *)src, symbol, count, offset, kind, NULL, 1, 0);
}

SIM_API cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind)
{
    return symbol_copy(FROM_SYMBOL, dst, symbol, count, offset, kind, NULL, 0, 0);
}

SIM_API cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count,
                                              size_t offset, enum cudaMemcpyKind kind)
{
    return symbol_copy(FROM_SYMBOL, dst, symbol, count, offset, kind, NULL, 1, 0);
}

SIM_API cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count,
                                            size_t offset, enum cudaMemcpyKind kind, cudaStream_t s)
{
    return symbol_copy(TO_SYMBOL, (void *)src, symbol, count, offset, kind, s, 0, 1);
}

SIM_API cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count,
                                                 size_t offset, enum cudaMemcpyKind kind,
                                                 cudaStream_t s)
{
    return symbol_copy(TO_SYMBOL, (void *)src, symbol, count, offset, kind, s, 1, 1);
}

SIM_API cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count,
                                              size_t offset, enum cudaMemcpyKind kind,
                                              cudaStream_t s)
{
    return symbol_copy(FROM_SYMBOL, dst, symbol, count, offset, kind, s, 0, 1);
}

SIM_API cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count,
                                                   size_t offset, enum cudaMemcpyKind kind,
                                                   cudaStream_t s)
{
    return symbol_copy(FROM_SYMBOL, dst, symbol, count, offset, kind, s, 1, 1);
}
