/* python.h - the Python frames of the calling thread (trace/python.c).
 *
 * Found at run time through the CPython API of whatever libpython (or python
 * executable) the process has loaded, 3.8 to 3.13; the version is read at
 * run time. Frames are read only when the calling thread holds the GIL; the
 * GIL is never taken and Python is never called from a thread that does not
 * hold it; with no Python in the process every call returns 0. */
#ifndef FS_PYTHON_H
#define FS_PYTHON_H

#include "../format/format.h"

#include <stdint.h>

/* The id of the calling thread's Python stack (FS_REC_PYSTACK, innermost
 * frame first, at most max_frames), defined in the trace on first sight with
 * its file and function names as strings; 0 when the thread does not hold
 * the GIL, has no Python frame, or no Python is loaded. */
uint32_t fs_python_stack(unsigned max_frames);

/* Copies the frames of Python stack `id` into out (at most max); returns
 * how many, 0 for an unknown id. For snapshot files. */
uint32_t fs_python_frames(uint32_t id, fs_fmt_pyframe *out, uint32_t max);

#endif /* FS_PYTHON_H */
