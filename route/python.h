/* python.h - which Python is about to run, or is running: the interpreter
 * whose PyTorch the route is for (torch_route.h). Plain C over argv, the
 * files it names, PATH and /proc; it runs nothing. */
#ifndef FS_ROUTE_PYTHON_H
#define FS_ROUTE_PYTHON_H

#include <stdbool.h>
#include <stddef.h>

/* Whether argv runs Python: an interpreter, torchrun, a script whose #!
 * names Python, a .py file, pip's /bin/sh trampoline, through env, env -S
 * or sh -c, or a launcher (mpirun, srun, uv run, ...) that starts Python by
 * name. `interp` (PATH_MAX bytes) gets the interpreter it runs, or "" when
 * that cannot be told. */
bool fs_route_argv_python(char *const *argv, char *interp);

/* Whether this process is a Python interpreter (/proc/self/exe's name), with
 * the interpreter as it was started into `python`: argv[0] found on PATH as
 * the shell found it, since a venv's bin/python is a link to the base
 * interpreter and /proc/self/exe alone would miss the venv's packages. */
bool fs_route_process_python(char *python, size_t len);

#endif /* FS_ROUTE_PYTHON_H */
