/* fold.h - which frames of a stack are plumbing, and folding them: the
 * rule every command that prints an allocation's stack applies (top,
 * report, leaks, diff, the out-of-memory explanation), in one table in
 * fold.c.
 *
 * A PyTorch allocation's native stack is 40 to 60 frames, most of them
 * the Python interpreter's eval loop and PyTorch's dispatcher (boxing
 * wrappers, at::_ops redispatch, generated registration wrappers), which
 * are the same for every allocation and say nothing of where it came from.
 * A run of such frames prints as one line saying how many were folded and
 * what they were (one frame too: a dispatcher frame is a line of hundreds
 * of characters of template arguments); the allocator's entry, PyTorch's own
 * functions (at::native, autograd's nodes) and the Python frames stay.
 * PyTorch's memory_viz omits the same kind of frames (_frame_filter in
 * torch/cuda/_memory_viz.py); `--full-stacks` prints every frame. */
#ifndef FS_FOLD_H
#define FS_FOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The fold groups, by what their frames are */
enum fs_fold_group {
    FS_FOLD_PYTHON,     /* the Python interpreter */
    FS_FOLD_BINDINGS,   /* pybind11's call machinery */
    FS_FOLD_DISPATCHER, /* PyTorch's dispatcher */
    FS_FOLD_CXX,        /* the C++ standard library's calls (std::function, invoke) */
    FS_FOLD_START,      /* thread and program start */
    FS_FOLD_GROUPS
};

/* The group of one source frame: `module` the path of the module it lies
 * in (NULL: none known), `function` its demangled name (NULL: unknown),
 * `file` its source file (NULL: no line information). -1 when it is not
 * plumbing: it says where. */
int fs_fold_group_of(const char *module, const char *function, const char *file);

/* Whether the module at path is the Python interpreter: libpython, or a
 * python executable that links it statically (where an allocation's
 * Python frames go among its native ones, render.h). */
bool fs_fold_interpreter(const char *path);

/* A stack's text being built, lines separated by '\n', with the runs of
 * plumbing folded as they end. */
typedef struct fs_fold {
    char *text;
    size_t len, at;  /* text's size, and the length written */
    bool full;       /* --full-stacks: fold nothing */
    size_t run_at;   /* where the current run began in text (its separator) */
    uint32_t run;    /* frames in the current run; 0: none */
    unsigned groups; /* the run's groups, 1 << fs_fold_group */
} fs_fold;

/* One more line of the stack: a frame of `group` (fs_fold_group_of; -1
 * for a frame that is not plumbing, or a Python frame). */
void fs_fold_line(fs_fold *f, const char *line, int group);
/* The stack ends: a run still open is folded. */
void fs_fold_end(fs_fold *f);

#endif /* FS_FOLD_H */
