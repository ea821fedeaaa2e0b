/* python.h - the Python frames of the calling thread (trace/python.c).
 *
 * Found at run time through the CPython API of whatever libpython (or python
 * executable) the process has loaded, 3.8 to 3.13; the version is read at
 * run time. Frames are read only by a thread that holds the GIL: as it
 * allocates, or as it lets the GIL go (the shim's PyEval_SaveThread,
 * interpose/python/gil.c), for what it allocates until it takes the GIL
 * back. The GIL is never taken and Python is never called from a thread
 * that does not hold it; with no Python in the process every call returns
 * 0. */
#ifndef FS_PYTHON_H
#define FS_PYTHON_H

#include "../format/format.h"

#include <stdint.h>

/* The id of the calling thread's Python stack (FS_REC_PYSTACK, innermost
 * frame first, at most max_frames), defined in the trace on first sight with
 * its file and function names as strings: read now when the thread holds
 * the GIL, else the one it had when it last let the GIL go through the
 * shim. 0 when there is none (no Python frame, no Python state, no Python
 * loaded, the GIL let go some other way) or tracing is below trace:python. */
uint32_t fs_python_stack(unsigned max_frames);

/* The calling thread, which holds the GIL, is about to let it go
 * (PyEval_SaveThread, PyEval_ReleaseThread): its stack (at most max_frames,
 * 0 for none) becomes the thread's until the matching
 * fs_python_gil_acquired. Called only at trace:python. */
void fs_python_gil_release(unsigned max_frames);
/* The calling thread took the GIL back (PyEval_RestoreThread,
 * PyEval_AcquireThread): the stack of the release this matches is
 * forgotten, an enclosing one's is the thread's again. */
void fs_python_gil_acquired(void);

/* fork's handlers (trace/session.c): the table's lock is held across it. */
void fs_python_fork_prepare(void);
void fs_python_fork_parent(void);
void fs_python_fork_child(void);

/* Copies the frames of Python stack `id` into out (at most max); returns
 * how many, 0 for an unknown id. For snapshot files. */
uint32_t fs_python_frames(uint32_t id, fs_fmt_pyframe *out, uint32_t max);

#endif /* FS_PYTHON_H */
