/* fold_unit.c - the rule that folds a stack's plumbing (analysis/lib/fold.c)
 * on frames as a real trace gives them: the names below are frames of a
 * PyTorch 2.15 FSDP2 job on the simulated device (fsdpshim sim --conf
 * trace:python, report --full-stacks), symbolised from PyPI's wheel (no
 * line information) and pyenv's python3.11 (with DWARF). PyTorch's own
 * functions and the allocator's entry stay; its dispatcher, the
 * interpreter, pybind11, std::function and thread start fold; a pattern in
 * a template argument or an operator's brackets does not count. Then the
 * folding of runs: each run becomes one line naming its groups, a run of
 * one frame too, --full-stacks keeps all, a small buffer is never overrun. */
#include "fold.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#define TORCH "/venv/lib/python3.11/site-packages/torch/lib/"

typedef struct frame {
    const char *module, *function, *file;
    int group; /* -1: it says where */
} frame;

static const frame frames[] = {
    /* the allocator's entry and PyTorch's own functions: kept */
    {TORCH "libc10_cuda.so",
     "c10::cuda::CUDACachingAllocator::CudaMallocAsync::(anonymous namespace)::mallocAsync(void**, "
     "signed char, unsigned long, CUstream_st*)",
     NULL, -1},
    {TORCH "libtorch_cuda.so",
     "at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>, "
     "std::optional<c10::Layout>, std::optional<c10::Device>, std::optional<bool>, "
     "std::optional<c10::MemoryFormat>)",
     NULL, -1},
    {TORCH "libtorch_cuda.so",
     "void at::cuda::blas::gemm_internal_cublas<float, float>(char, char, long, long, long, "
     "at::OpMathType<float>::type, float const*, long, float const*, long, "
     "at::OpMathType<float>::type, float*, long)",
     NULL, -1},
    {TORCH "libtorch_cuda.so",
     "at::native::(anonymous namespace)::addmm_out_cuda_impl(at::Tensor&, at::Tensor const&, "
     "at::Tensor const&, at::Tensor const&, c10::Scalar const&, c10::Scalar const&, "
     "at::native::(anonymous namespace)::Activation, bool)::{lambda()#5}::operator()() const "
     "[clone .isra.0]",
     NULL, -1},
    {TORCH "libtorch_cpu.so",
     "torch::autograd::generated::AddmmBackward0::apply(std::vector<at::Tensor, "
     "std::allocator<at::Tensor> >&&)",
     NULL, -1},
    {TORCH "libtorch_cpu.so",
     "torch::autograd::Engine::thread_main(std::shared_ptr<torch::autograd::GraphTask> const&)",
     NULL, -1},
    {TORCH "libtorch_python.so",
     "torch::autograd::THPVariable_zeros_like(_object*, _object*, _object*)", NULL, -1},
    {TORCH "libtorch_python.so",
     "dispatchDTensorOp(c10::OperatorHandle const&, pybind11::handle, pybind11::handle, "
     "pybind11::handle, std::vector<c10::IValue, std::allocator<c10::IValue> >*)",
     NULL, -1},
    {"/usr/bin/trainer", "main", "trainer.c", -1},
    {NULL, NULL, NULL, -1},
    /* a dispatcher name inside a template argument, or after an operator
     * whose symbol is a bracket, is not the function's own name */
    {TORCH "libtorch_cpu.so", "at::native::foo<c10::impl::X>(at::Tensor const&)", NULL, -1},
    {TORCH "libtorch_cpu.so", "bool at::operator< <c10::impl::X>(c10::impl::X const&)", NULL, -1},
    {TORCH "libtorch_cpu.so", "at::native::bar(c10::impl::X)", NULL, -1},

    /* PyTorch's dispatcher */
    {TORCH "libtorch_cuda.so",
     "c10::impl::wrap_kernel_functor_unboxed_<c10::impl::detail::WrapFunctionIntoFunctor_<c10::"
     "CompileTimeFunctionPointer<at::Tensor (at::Tensor const&, at::Tensor const&), "
     "&at::(anonymous namespace)::wrapper_CUDA_mm>, at::Tensor, "
     "c10::guts::typelist::typelist<at::Tensor const&, at::Tensor const&> >, at::Tensor "
     "(at::Tensor const&, at::Tensor const&)>::call(c10::OperatorKernel*, c10::DispatchKeySet, "
     "at::Tensor const&, at::Tensor const&)",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cpu.so",
     "at::_ops::mm::redispatch(c10::DispatchKeySet, at::Tensor const&, at::Tensor const&)", NULL,
     FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cpu.so", "at::_ops::mm::call(at::Tensor const&, at::Tensor const&)", NULL,
     FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cuda.so",
     "at::(anonymous namespace)::(anonymous namespace)::wrapper_CUDA_memory_format_empty(c10::"
     "ArrayRef<c10::SymInt>, std::optional<c10::ScalarType>, std::optional<c10::Layout>, "
     "std::optional<c10::Device>, std::optional<bool>, std::optional<c10::MemoryFormat>)",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cpu.so",
     "torch::autograd::VariableType::(anonymous namespace)::mm(c10::DispatchKeySet, at::Tensor "
     "const&, at::Tensor const&)",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cpu.so",
     "void c10::BoxedKernel::make_boxed_function<&(anonymous "
     "namespace)::pythonTLSSnapshotFallback>(c10::OperatorKernel*, c10::OperatorHandle const&, "
     "c10::DispatchKeySet, std::vector<c10::IValue, std::allocator<c10::IValue> >*)",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cpu.so",
     "(anonymous namespace)::pythonFallback(c10::OperatorHandle const&, c10::DispatchKeySet, "
     "std::vector<c10::IValue, std::allocator<c10::IValue> >*)",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_python.so",
     "torch::handle_torch_function_no_python_arg_parser(c10::ArrayRef<_object*>, _object*, "
     "_object*, char const*, _object*, char const*, c10::OperatorHandle const*, "
     "std::vector<c10::IValue, std::allocator<c10::IValue> >*, torch::TorchFunctionName)",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_python.so",
     "torch::detail::(anonymous namespace)::ConcretePyInterpreterVTable::dispatch(c10::"
     "OperatorHandle const&, std::vector<c10::IValue, std::allocator<c10::IValue> >*) const",
     NULL, FS_FOLD_DISPATCHER},
    {TORCH "libtorch_cpu.so",
     "c10::impl::detail::WrapFunctionIntoFunctor_<X>::operator()(at::Tensor const&)", NULL,
     FS_FOLD_DISPATCHER},
    /* a build with line information: memory_viz's file patterns */
    {TORCH "libtorch_cuda.so", "at::(anonymous namespace)::empty",
     "/build/aten/src/ATen/RegisterCUDA_0.cpp", FS_FOLD_DISPATCHER},

    /* the Python interpreter: by module, or by name where it is embedded */
    {"/root/.pyenv/versions/3.11.7/bin/python3.11", "cfunction_call", "Objects/methodobject.c",
     FS_FOLD_PYTHON},
    {"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", "_PyEval_EvalFrameDefault", NULL,
     FS_FOLD_PYTHON},
    {"/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", NULL, NULL, FS_FOLD_PYTHON},
    {"/opt/app/bin/server", "_PyEval_EvalFrameDefault", "Python/ceval.c", FS_FOLD_PYTHON},
    {"/opt/app/bin/server", "PyObject_Call", NULL, FS_FOLD_PYTHON},
    {"/opt/app/bin/server", "method_vectorcall", NULL, FS_FOLD_PYTHON},
    /* pybind11, std::function, thread start */
    {TORCH "libtorch_python.so", "pybind11::cpp_function::dispatcher(_object*, _object*, _object*)",
     NULL, FS_FOLD_BINDINGS},
    {TORCH "libtorch_cpu.so",
     "std::_Function_handler<void (), torch::autograd::Engine::X>::_M_invoke(std::_Any_data "
     "const&)",
     NULL, FS_FOLD_CXX},
    {"/lib/x86_64-linux-gnu/libstdc++.so.6", NULL, NULL, FS_FOLD_CXX},
    {"/lib/x86_64-linux-gnu/libc.so.6", "start_thread", "./nptl/pthread_create.c", FS_FOLD_START},
    {"/lib/x86_64-linux-gnu/libc.so.6", "__clone3", NULL, FS_FOLD_START},
    {"/usr/bin/trainer", "_start", NULL, FS_FOLD_START},
    /* a name that only begins like a rule's */
    {"/lib/x86_64-linux-gnu/libc.so.6", "clone_files", NULL, -1},
    {"/usr/bin/trainer", "my_PyEval_helper", NULL, -1},
};

static void test_groups(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof frames / sizeof frames[0]; i++) {
        const frame *f = &frames[i];
        int got = fs_fold_group_of(f->module, f->function, f->file);
        if (got != f->group)
            fail_msg("%s in %s: group %d, not %d", f->function ? f->function : "(no symbol)",
                     f->module ? f->module : "(no module)", got, f->group);
    }
}

static void test_interpreter(void **state)
{
    (void)state;
    assert_true(fs_fold_interpreter("/usr/lib/x86_64-linux-gnu/libpython3.12.so.1.0"));
    assert_true(fs_fold_interpreter("/root/.pyenv/versions/3.11.7/bin/python3.11"));
    assert_false(fs_fold_interpreter(TORCH "libtorch_python.so"));
}

/* lines (group, text) folded into a buffer of len bytes */
static const char *fold_lines(const int *groups, const char *const *lines, size_t n, bool full,
                              char *buf, size_t len)
{
    fs_fold f = {.text = buf, .len = len, .full = full};
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        fs_fold_line(&f, lines[i], groups[i]);
    fs_fold_end(&f);
    assert_int_equal(strlen(buf), f.at);
    return buf;
}

static void test_runs(void **state)
{
    static const char *const lines[] = {"site", "a", "b", "where", "c", "main", "d", "e"};
    static const int groups[] = {-1, FS_FOLD_DISPATCHER, FS_FOLD_DISPATCHER, -1, FS_FOLD_DISPATCHER,
                                 -1, FS_FOLD_PYTHON,     FS_FOLD_START};
    char buf[1024];
    (void)state;

    /* each run is one line, one frame's too, the last run folds at the end
     * with both of its groups named */
    assert_string_equal(fold_lines(groups, lines, 8, false, buf, sizeof buf),
                        "site\n... 2 frames folded: PyTorch's dispatcher (--full-stacks shows "
                        "them)\nwhere\n... 1 frame folded: PyTorch's dispatcher (--full-stacks "
                        "shows it)\nmain\n... 2 frames folded: the Python interpreter, "
                        "thread and program start (--full-stacks shows them)");
    /* --full-stacks: every line */
    assert_string_equal(fold_lines(groups, lines, 8, true, buf, sizeof buf),
                        "site\na\nb\nwhere\nc\nmain\nd\ne");
    /* a run at the start */
    assert_string_equal(fold_lines(groups + 1, lines + 1, 3, false, buf, sizeof buf),
                        "... 2 frames folded: PyTorch's dispatcher (--full-stacks shows "
                        "them)\nwhere");
    /* a buffer too small for the text: cut, never overrun */
    char small[24];
    memset(small, 'x', sizeof small);
    fold_lines(groups, lines, 8, false, small, 16);
    assert_true(strlen(small) < 16);
    assert_int_equal(small[20], 'x');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_groups),
        cmocka_unit_test(test_interpreter),
        cmocka_unit_test(test_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
