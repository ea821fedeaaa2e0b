/* fold.c - the plumbing frames of a stack, and their folding (fold.h).
 *
 * The rule is the table below, and only it: a frame is plumbing when one
 * row matches it. Rows match a module by its file name, a function by a
 * part of its demangled name, a C function by its whole name, or a source
 * file by a part of its path (for libraries built with line information).
 * A row's pattern is matched in a function's own name, not in its template
 * arguments or parameters (at depth 0 of <> and ()): at::native::foo<
 * c10::impl::X> is PyTorch's, not the dispatcher's. Frames without a
 * symbol are matched by their module alone. */
#include "fold.h"

#include <stdio.h>
#include <string.h>

enum how {
    BY_MODULE,   /* the module's file name starts with the pattern */
    BY_FUNCTION, /* the function's name (depth 0) holds the pattern */
    BY_NAME,     /* a C function: its name is the pattern */
    BY_FILE,     /* the source file's path holds the pattern */
};

typedef struct rule {
    enum how how;
    const char *pattern;
    enum fs_fold_group group;
} rule;

static const rule rules[] = {
    /* CPython: everything in libpython or a python executable (its eval
     * loop, calls, method wrappers, startup), and its entry points where
     * an embedding program links it under another name */
    {BY_MODULE, "libpython", FS_FOLD_PYTHON},
    {BY_MODULE, "python", FS_FOLD_PYTHON},
    {BY_FUNCTION, "_PyEval_", FS_FOLD_PYTHON},
    {BY_FUNCTION, "PyEval_", FS_FOLD_PYTHON},
    {BY_FUNCTION, "_PyObject_", FS_FOLD_PYTHON},
    {BY_FUNCTION, "PyObject_", FS_FOLD_PYTHON},
    {BY_FUNCTION, "_PyFunction_", FS_FOLD_PYTHON},
    {BY_FUNCTION, "PyFunction_", FS_FOLD_PYTHON},
    {BY_FUNCTION, "_PyVectorcall_", FS_FOLD_PYTHON},
    {BY_NAME, "cfunction_call", FS_FOLD_PYTHON},
    {BY_NAME, "cfunction_vectorcall_FASTCALL_KEYWORDS", FS_FOLD_PYTHON},
    {BY_NAME, "method_vectorcall", FS_FOLD_PYTHON},
    {BY_NAME, "slot_tp_call", FS_FOLD_PYTHON},
    {BY_FILE, "Python/ceval.c", FS_FOLD_PYTHON},
    {BY_FILE, "Objects/call.c", FS_FOLD_PYTHON},
    {BY_FILE, "Objects/methodobject.c", FS_FOLD_PYTHON},
    {BY_FILE, "Python/pythonrun.c", FS_FOLD_PYTHON},
    {BY_FILE, "Modules/main.c", FS_FOLD_PYTHON},
    /* pybind11's call machinery (the bound function itself stays) */
    {BY_FUNCTION, "pybind11::cpp_function::", FS_FOLD_BINDINGS},
    {BY_FUNCTION, "pybind11::detail::", FS_FOLD_BINDINGS},
    /* PyTorch's dispatcher: the boxing and unboxing wrappers, the
     * operator's call and redispatch entry points, the generated
     * registration wrappers (at::(anonymous namespace)::wrapper_CUDA_mm),
     * the autograd, inplace-or-view and tracing kernels that only pass the
     * call on, and the Python dispatch fallback (__torch_dispatch__) */
    {BY_FUNCTION, "c10::impl::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "c10::Dispatcher::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "c10::KernelFunction::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "c10::BoxedKernel::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "c10::OperatorHandle::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "c10::TypedOperatorHandle<", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "c10::callUnboxedKernelFunction", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "at::_ops::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "::wrapper_", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "torch::autograd::VariableType::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "torch::ADInplaceOrView::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "torch::TraceType::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "torch::handle_torch_function", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "ConcretePyInterpreterVTable::", FS_FOLD_DISPATCHER},
    {BY_FUNCTION, "pythonFallback(", FS_FOLD_DISPATCHER},
    {BY_FILE, "core/boxing/", FS_FOLD_DISPATCHER},
    {BY_FILE, "/Register", FS_FOLD_DISPATCHER},
    {BY_FILE, "/Redispatch", FS_FOLD_DISPATCHER},
    /* the C++ library between a caller and what it calls */
    {BY_MODULE, "libstdc++.so", FS_FOLD_CXX},
    {BY_MODULE, "libc++.so", FS_FOLD_CXX},
    {BY_FUNCTION, "std::function<", FS_FOLD_CXX},
    {BY_FUNCTION, "std::_Function_handler<", FS_FOLD_CXX},
    {BY_FUNCTION, "std::__invoke", FS_FOLD_CXX},
    {BY_FUNCTION, "std::invoke", FS_FOLD_CXX},
    {BY_FUNCTION, "c10::function_ref<", FS_FOLD_CXX},
    /* where every thread and the program begin */
    {BY_NAME, "start_thread", FS_FOLD_START},
    {BY_NAME, "clone", FS_FOLD_START},
    {BY_NAME, "clone3", FS_FOLD_START},
    {BY_NAME, "__clone", FS_FOLD_START},
    {BY_NAME, "__clone3", FS_FOLD_START},
    {BY_NAME, "_start", FS_FOLD_START},
    {BY_NAME, "__libc_start_main", FS_FOLD_START},
    {BY_NAME, "__libc_start_main_impl", FS_FOLD_START},
    {BY_NAME, "__libc_start_call_main", FS_FOLD_START},
};

static const char *const group_names[FS_FOLD_GROUPS] = {
    [FS_FOLD_PYTHON] = "the Python interpreter",   [FS_FOLD_BINDINGS] = "pybind11",
    [FS_FOLD_DISPATCHER] = "PyTorch's dispatcher", [FS_FOLD_CXX] = "the C++ library's calls",
    [FS_FOLD_START] = "thread and program start",
};

static bool ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

bool fs_fold_interpreter(const char *path)
{
    const char *base = base_name(path);
    return !strncmp(base, "libpython", 9) || !strncmp(base, "python", 6);
}

/* "operator<<", "operator()", "operator->": the length of the operator's
 * symbol after "operator", which must not count as brackets */
static size_t operator_symbol(const char *s)
{
    size_t n = 0;
    if (s[0] == '(' && s[1] == ')') return 2;
    while (s[n] && strchr("<>=!-+*/%&|^~[],", s[n]))
        n++;
    return n;
}

/* Whether pattern occurs in fn at depth 0 of its template arguments and
 * parameters, not inside an identifier. "(anonymous namespace)" is a
 * bracket pair at depth 0 that closes before the name goes on. */
static bool name_has(const char *fn, const char *pattern)
{
    size_t plen = strlen(pattern);
    int angle = 0, paren = 0;
    for (size_t i = 0; fn[i]; i++) {
        if (!angle && !paren && (!ident(pattern[0]) || !i || !ident(fn[i - 1])) &&
            !strncmp(fn + i, pattern, plen))
            return true;
        if ((!i || !ident(fn[i - 1])) && !strncmp(fn + i, "operator", 8) && !ident(fn[i + 8])) {
            i += 7 + operator_symbol(fn + i + 8);
            continue;
        }
        switch (fn[i]) {
        case '<':
            angle++;
            break;
        case '>':
            angle -= angle > 0;
            break;
        case '(':
            paren++;
            break;
        case ')':
            paren -= paren > 0;
            break;
        default:
            break;
        }
    }
    return false;
}

/* A C function's whole name: fn up to its parameters, if it has any */
static bool name_is(const char *fn, const char *name)
{
    size_t n = strlen(name);
    return !strncmp(fn, name, n) && (!fn[n] || fn[n] == '(' || fn[n] == ' ');
}

int fs_fold_group_of(const char *module, const char *function, const char *file)
{
    const char *base = module ? base_name(module) : NULL;
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++) {
        const rule *r = &rules[i];
        bool hit = false;
        switch (r->how) {
        case BY_MODULE:
            hit = base && !strncmp(base, r->pattern, strlen(r->pattern));
            break;
        case BY_FUNCTION:
            hit = function && name_has(function, r->pattern);
            break;
        case BY_NAME:
            hit = function && name_is(function, r->pattern);
            break;
        case BY_FILE:
            hit = file && strstr(file, r->pattern);
            break;
        }
        if (hit) return (int)r->group;
    }
    return -1;
}

/* ---- folding --------------------------------------------------------------------- */

static void append(fs_fold *f, const char *s)
{
    size_t n = strlen(s);
    if (!f->len) return;
    if (f->at + n + 1 > f->len) n = f->len - f->at - 1;
    memcpy(f->text + f->at, s, n);
    f->at += n;
    f->text[f->at] = '\0';
}

/* The run ends: its frames become one line */
static void end_run(fs_fold *f)
{
    char line[256];
    size_t at = 0;
    if (f->run && f->run_at <= f->at) {
        at += (size_t)snprintf(line, sizeof line, "... %u frame%s folded: ", f->run,
                               f->run == 1 ? "" : "s");
        for (int g = 0, n = 0; g < FS_FOLD_GROUPS && at < sizeof line; g++)
            if (f->groups & (1u << g))
                at += (size_t)snprintf(line + at, sizeof line - at, "%s%s", n++ ? ", " : "",
                                       group_names[g]);
        if (at < sizeof line)
            snprintf(line + at, sizeof line - at, " (--full-stacks shows %s)",
                     f->run == 1 ? "it" : "them");
        f->at = f->run_at;
        if (f->len) f->text[f->at] = '\0';
        if (f->at) append(f, "\n");
        append(f, line);
    }
    f->run = 0;
    f->groups = 0;
}

void fs_fold_line(fs_fold *f, const char *line, int group)
{
    if (f->full || group < 0) {
        if (f->run) end_run(f);
    } else if (!f->run++) {
        f->run_at = f->at;
        f->groups = 0;
    }
    if (group >= 0 && !f->full) f->groups |= 1u << group;
    if (f->at) append(f, "\n");
    append(f, line);
}

void fs_fold_end(fs_fold *f)
{
    if (f->run) end_run(f);
}
