/* torch_route.h - PyTorch's route through the shim, shared by the launcher
 * (cli/run.c, for the command it is about to run) and the preloaded
 * library (interpose/pytorch/route.c, from its constructor in a Python
 * process), so that `fsdpshim run` and LD_PRELOAD alone route PyTorch the
 * same way (SPEC 3, docs/cli.md). Plain C over the environment: it knows
 * nothing of CUDA and prints nothing; each caller says the note its own way. */
#ifndef FSDPSHIM_ROUTE_TORCH_ROUTE_H
#define FSDPSHIM_ROUTE_TORCH_ROUTE_H

#include <stdbool.h>
#include <stddef.h>

/* Set in the environment once a process has routed PyTorch, so that its
 * children (torchrun's workers, a program under `fsdpshim run`) inherit the
 * route instead of deciding, and saying, it again. */
#define FS_ROUTE_MARK "FSDPSHIM_TORCH_ROUTED"

/* The PyTorch adapter's library the route chose (torch_route:adapter), for
 * the shim to install when PyTorch is loaded (interpose/pytorch/install.c);
 * a user may set it to an adapter of their own build. Unset by any other
 * route. */
#define FS_ROUTE_ADAPTER_VAR "FSDPSHIM_TORCH_ADAPTER"

/* python, python3, python3.12 (an interpreter's file name) */
bool fs_route_python_name(const char *base);

/* The version of the PyTorch that the interpreter at `python` (a path as it
 * will be run, not resolved through links: a venv's bin/python is a link)
 * imports, read from torch/version.py where that interpreter looks for
 * packages, without running it: PYTHONPATH, its venv (pyvenv.cfg), the user
 * site, its prefix. Fills `text` (e.g. "2.15.0+cu132"), *major and *minor;
 * false when none is found. */
bool fs_route_torch_version(const char *python, char *text, size_t len, int *major, int *minor);

/* The PyTorch build in `torch_dir` (the package's directory), read from its
 * version.py: "<__version__>@<git_version>", e.g.
 * "2.15.0+cu132@d0f2af8b66b20da4baa50644c0cd3f887a2eae2e". An adapter is
 * compiled for exactly one. False when version.py says neither. */
bool fs_route_torch_key(const char *torch_dir, char *key, size_t len);

/* Routes PyTorch for a process about to run `python` (NULL or "" when not
 * known). With torch_route:adapter in FSDPSHIM_CONF (`shim_conf_in`) and an
 * adapter built for the PyTorch that `python` imports, at
 * `<lib_dir>/torch/<key>/libfsdpshim_torch.so` (`lib_dir`: where
 * libfsdpshim.so is; key: fs_route_torch_key), FS_ROUTE_ADAPTER_VAR names
 * it and PyTorch's backend is left alone: the shim swaps the adapter in
 * when PyTorch loads. Otherwise PYTORCH_CUDA_ALLOC_CONF gets
 * backend:cudaMallocAsync plus the
 * user's keys the shim does not take; the user's keys that the shim takes go
 * into *shim_conf (malloc'ed, NULL when FSDPSHIM_CONF is unchanged) before
 * `shim_conf_in`, which wins; on a PyTorch whose default NCCL process group
 * aborts under that backend TORCH_DIST_USE_NCCL2=0 is set unless the user
 * chose a process group, and a user's explicit choice of that group keeps
 * PyTorch's own allocator in charge instead. With
 * PYTORCH_NO_CUDA_MEMORY_CACHING=1 nothing is changed (PyTorch then calls
 * cudaMalloc/cudaFree for every tensor), said. Sets FS_ROUTE_MARK. `note`
 * gets the one line to say (empty when nothing of the user's setting
 * changed). Returns -1 with the reason in `note` when the environment cannot
 * be set. */
int fs_route_torch(const char *python, const char *lib_dir, const char *shim_conf_in,
                   char **shim_conf, char *note, size_t note_len);

#endif
