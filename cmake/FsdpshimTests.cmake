# Helpers shared by every tests/ and examples/ CMakeLists.
#
# Labels in use: unit, sim, integration, allocator, gpu, bench.
# A test exits 77 to say "skipped" (ctest SKIP_RETURN_CODE): gpu tests do so
# when no GPU is present, which ctest reports as skipped, never as passed.

# fs_cuda_program(<target> SOURCES <src...> [LIBS <lib...>] [REAL])
#   An ordinary CUDA host program: compiled against the toolkit headers and
#   linked with the simulated libcudart/libnccl (or, with REAL, with the
#   toolkit's own libraries, for the gpu suite). It knows nothing of the shim.
function(fs_cuda_program target)
  cmake_parse_arguments(P "REAL" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${target} ${P_SOURCES})
  target_include_directories(${target} PRIVATE "${FSDPSHIM_CUDA_INCLUDE}")
  if(P_REAL)
    target_link_libraries(${target} PRIVATE "${FSDPSHIM_REAL_CUDART}" "${FSDPSHIM_REAL_NCCL}" ${P_LIBS} Threads::Threads)
    # No build rpath: the loader's search (or LD_LIBRARY_PATH=build/lib/sim)
    # decides which libcudart.so.13 the program gets, as for PyTorch's libraries.
    set_target_properties(${target} PROPERTIES SKIP_BUILD_RPATH TRUE)
  else()
    target_link_libraries(${target} PRIVATE fs_sim_cudart fs_sim_nccl ${P_LIBS} Threads::Threads)
  endif()
endfunction()

# fs_add_test(<name> COMMAND <cmd...> LABELS <label...> [TIMEOUT <s>] [ENVIRONMENT <k=v...>])
function(fs_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "COMMAND;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${T_COMMAND})
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}"
    TIMEOUT ${T_TIMEOUT}
    SKIP_RETURN_CODE 77
    ENVIRONMENT "${T_ENVIRONMENT}")
endfunction()
