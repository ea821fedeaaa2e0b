/* gil.h - the shim's definitions of CPython's GIL release and acquire
 * (gil.c), by which trace:python gives the Python frames of a thread that
 * let the GIL go to what it allocates meanwhile (trace/python.h). */
#ifndef FS_GIL_H
#define FS_GIL_H

/* Tracing started at trace:python, keeping `frames` Python frames per
 * stack: the hooks capture from now on, and where the interpreter's own
 * definitions come ahead of the shim's (a python executable linked with
 * libpython statically, as Debian's /usr/bin/python3 is, or a shim that was
 * not preloaded), every loaded object's slots of them are pointed at the
 * shim's. Does nothing in a process without Python. */
void fs_python_gil_start(unsigned frames);

/* An object was just loaded (the interpreter looked up an extension
 * module's PyInit_ function): its slots too, where they need it. Cheap
 * when tracing is below trace:python. */
void fs_python_gil_loaded(void);

#endif /* FS_GIL_H */
