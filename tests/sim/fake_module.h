/* fake_module.h - what nvcc's generated host code does for a .cu file with
 * kernels and __device__ variables, written out in C for the sim's tests:
 * the registration ABI (crt/host_runtime.h, which is C++ only, so its
 * prototypes are repeated here), a fat binary wrapper as nvcc emits it, and
 * host stubs that pop the <<<>>> configuration and launch through
 * __cudaGetKernel/__cudaLaunchKernel. The sim reads no device code, so the
 * fat binary fs_fake_wrapper carries none; fs_fake_cubin_make and
 * fs_fake_fatbin_make build the parts of an image the sim does read (symbol
 * tables and initialised data). */
#ifndef FS_TEST_FAKE_MODULE_H
#define FS_TEST_FAKE_MODULE_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime_api.h>
#include <fatbinary_section.h>

void **__cudaRegisterFatBinary(void *fat_cubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *host_fun, char *device_fun,
                            const char *device_name, int thread_limit, uint3 *tid, uint3 *bid,
                            dim3 *bdim, dim3 *gdim, int *wsize);
void __cudaRegisterVar(void **handle, char *host_var, char *device_address, const char *device_name,
                       int ext, size_t size, int constant, int global);
char __cudaInitModule(void **handle);
unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t smem,
                                     struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *smem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 grid, dim3 block, void **args, size_t smem,
                               cudaStream_t stream);

/* kernel<<<grid, block, smem, stream>>>(args...), as nvcc expands it. */
#define FS_LAUNCH(stub, grid, block, smem, stream, ...)                                            \
    (__cudaPushCallConfiguration((grid), (block), (smem), (stream)) ? (void)0 : stub(__VA_ARGS__))

/* The body of a host stub: pop the configuration, launch by handle. */
#define FS_STUB_BODY(stub, ...)                                                                    \
    do {                                                                                           \
        static cudaKernel_t handle;                                                                \
        static int looked_up;                                                                      \
        void *args[] = {__VA_ARGS__};                                                              \
        dim3 grid, block;                                                                          \
        size_t smem;                                                                               \
        cudaStream_t stream;                                                                       \
        if (!looked_up) looked_up = __cudaGetKernel(&handle, (const void *)stub) == cudaSuccess;   \
        if (__cudaPopCallConfiguration(&grid, &block, &smem, &stream) != cudaSuccess) return;      \
        (void)__cudaLaunchKernel(handle, grid, block, args, smem, stream);                         \
    } while (0)

/* A fat binary header with no entries, and the wrapper nvcc points the
 * registration at (__fatDeviceText). */
static const unsigned long long fs_fake_fatbin[2] = {0x00100001BA55ED50ull, 0};
static const __fatBinC_Wrapper_t fs_fake_wrapper = {FATBINC_MAGIC, FATBINC_VERSION, fs_fake_fatbin,
                                                    NULL};

/* A cubin as nvcc lays it out, reduced to what the sim reads: a symbol
 * table with two entry points, a device function and a 64-byte global
 * "table" initialised to 7, 8, 9, ... (in .nv.global.init). */
struct fs_fake_cubin {
    Elf64_Ehdr eh;
    Elf64_Shdr sh[6];
    Elf64_Sym sym[5];
    char strtab[64];
    char shstrtab[64];
    int table[16];
};

static inline void fs_fake_cubin_make(struct fs_fake_cubin *c)
{
    memset(c, 0, sizeof *c);
    memcpy(c->eh.e_ident, ELFMAG, SELFMAG);
    c->eh.e_ident[EI_CLASS] = ELFCLASS64;
    c->eh.e_ident[EI_DATA] = ELFDATA2LSB;
    c->eh.e_type = ET_EXEC;
    c->eh.e_machine = 190; /* EM_CUDA */
    c->eh.e_shoff = offsetof(struct fs_fake_cubin, sh);
    c->eh.e_shentsize = sizeof(Elf64_Shdr);
    c->eh.e_shnum = 6;
    c->eh.e_shstrndx = 1;
    memcpy(c->shstrtab, "\0.shstrtab\0.strtab\0.symtab\0.nv.global.init\0.text.k\0", 52);
    memcpy(c->strtab, "\0kern\0helper\0table\0other\0", 26);
    c->sh[1] = (Elf64_Shdr){.sh_name = 1,
                            .sh_type = SHT_STRTAB,
                            .sh_offset = offsetof(struct fs_fake_cubin, shstrtab),
                            .sh_size = 64};
    c->sh[2] = (Elf64_Shdr){.sh_name = 11,
                            .sh_type = SHT_STRTAB,
                            .sh_offset = offsetof(struct fs_fake_cubin, strtab),
                            .sh_size = 64};
    c->sh[3] = (Elf64_Shdr){.sh_name = 19,
                            .sh_type = SHT_SYMTAB,
                            .sh_offset = offsetof(struct fs_fake_cubin, sym),
                            .sh_size = sizeof c->sym,
                            .sh_link = 2,
                            .sh_entsize = sizeof(Elf64_Sym)};
    c->sh[4] = (Elf64_Shdr){.sh_name = 27,
                            .sh_type = SHT_PROGBITS,
                            .sh_offset = offsetof(struct fs_fake_cubin, table),
                            .sh_size = 64};
    c->sh[5] = (Elf64_Shdr){.sh_name = 43, .sh_type = SHT_PROGBITS};
    for (int i = 0; i < 16; i++)
        c->table[i] = 7 + i;
    /* STO_CUDA_ENTRY (0x10) marks kernels; "helper" is a device function. */
    c->sym[1] = (Elf64_Sym){.st_name = 1,
                            .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                            .st_other = 0x10,
                            .st_shndx = 5,
                            .st_size = 128};
    c->sym[2] = (Elf64_Sym){
        .st_name = 6, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_shndx = 5, .st_size = 64};
    c->sym[3] = (Elf64_Sym){.st_name = 13,
                            .st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT),
                            .st_shndx = 4,
                            .st_size = 64};
    c->sym[4] = (Elf64_Sym){.st_name = 19,
                            .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC),
                            .st_other = 0x10,
                            .st_shndx = 5,
                            .st_size = 32};
}

/* A fat binary holding one entry of `kind` (1 PTX, 2 cubin) with `flags`. */
static inline unsigned char *fs_fake_fatbin_make(uint16_t kind, uint64_t flags, const void *payload,
                                                 uint64_t size)
{
    unsigned char *fb = calloc(1, 16 + 64 + size);
    uint32_t magic = 0xBA55ED50, hs = 64;
    uint16_t version = 1, header = 16;
    uint64_t fat = 64 + size;
    memcpy(fb, &magic, 4);
    memcpy(fb + 4, &version, 2);
    memcpy(fb + 6, &header, 2);
    memcpy(fb + 8, &fat, 8);
    memcpy(fb + 16, &kind, 2);
    memcpy(fb + 20, &hs, 4);
    memcpy(fb + 24, &size, 8);
    memcpy(fb + 16 + 0x28, &flags, 8);
    memcpy(fb + 80, payload, size);
    return fb;
}

#endif /* FS_TEST_FAKE_MODULE_H */
