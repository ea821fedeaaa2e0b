# Helpers shared by every tests/ and examples/ CMakeLists.
#
# Labels in use: unit, sim, integration, allocator, gpu, bench, torch, fuzz,
# stress (minutes of repeated races; scripts/test.sh runs them only with
# FSDPSHIM_TEST_STRESS=1).
# A test exits 77 to say "skipped" (ctest SKIP_RETURN_CODE): gpu tests do so
# when no GPU is present, which ctest reports as skipped, never as passed.

# fs_cuda_program(<target> SOURCES <src...> [LIBS <lib...>] [REAL | STATIC])
#   An ordinary CUDA host program: compiled against the toolkit headers and
#   linked with the simulated libcudart/libnccl (or, with REAL, with the
#   toolkit's own libraries, for the gpu suite, with FSDPSHIM_REAL_RUNTIME
#   defined for what only the sim can be asked; with STATIC, with the
#   toolkit's static runtime as nvcc links by default, so that no
#   libcudart.so is loaded and the program reaches the driver only through
#   dlopen and cuGetProcAddress). It knows nothing of the shim.
function(fs_cuda_program target)
  cmake_parse_arguments(P "REAL;STATIC" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${target} ${P_SOURCES})
  target_include_directories(${target} PRIVATE "${FSDPSHIM_CUDA_INCLUDE}")
  if(P_STATIC)
    target_link_libraries(${target} PRIVATE "${FSDPSHIM_CUDA_ROOT}/lib64/libcudart_static.a"
      ${P_LIBS} ${CMAKE_DL_LIBS} rt Threads::Threads)
    target_compile_definitions(${target} PRIVATE FSDPSHIM_REAL_RUNTIME)
  elseif(P_REAL)
    target_link_libraries(${target} PRIVATE "${FSDPSHIM_REAL_CUDART}" "${FSDPSHIM_REAL_NCCL}" ${P_LIBS} Threads::Threads)
    # No build rpath: the loader's search (or LD_LIBRARY_PATH=build/lib/sim)
    # decides which libcudart.so.13 the program gets, as for PyTorch's libraries.
    set_target_properties(${target} PROPERTIES SKIP_BUILD_RPATH TRUE)
    target_compile_definitions(${target} PRIVATE FSDPSHIM_REAL_RUNTIME)
  else()
    target_link_libraries(${target} PRIVATE sim_libcudart sim_libnccl ${P_LIBS} Threads::Threads)
  endif()
endfunction()

# fs_add_test(<name> COMMAND <cmd...> LABELS <label...> [TIMEOUT <s>] [ENVIRONMENT <k=v...>])
function(fs_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "COMMAND;LABELS;ENVIRONMENT" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  add_test(NAME ${name} COMMAND ${T_COMMAND})
  # TSan reads tests/tsan.supp in every test, added to the test's own
  # TSAN_OPTIONS where it has some
  if("thread" IN_LIST FSDPSHIM_SANITIZE)
    set(supp "suppressions=${PROJECT_SOURCE_DIR}/tests/tsan.supp")
    set(env "")
    set(found FALSE)
    foreach(e IN LISTS T_ENVIRONMENT)
      if(e MATCHES "^TSAN_OPTIONS=(.*)$")
        set(e "TSAN_OPTIONS=${CMAKE_MATCH_1}:${supp}")
        set(found TRUE)
      endif()
      list(APPEND env "${e}")
    endforeach()
    if(NOT found)
      list(APPEND env "TSAN_OPTIONS=${supp}")
    endif()
    set(T_ENVIRONMENT "${env}")
  endif()
  set_tests_properties(${name} PROPERTIES
    LABELS "${T_LABELS}"
    TIMEOUT ${T_TIMEOUT}
    SKIP_RETURN_CODE 77
    ENVIRONMENT "${T_ENVIRONMENT}")
  # gpu tests share one device and several read its free memory: one at a
  # time, even under ctest -j
  if("gpu" IN_LIST T_LABELS)
    set_tests_properties(${name} PROPERTIES RESOURCE_LOCK gpu_device)
  endif()
endfunction()

# fs_preload_env(<var> [<library>...])
#   The ENVIRONMENT entries that run a test program with <library>s (default:
#   the shim) preloaded, right for this build's FSDPSHIM_SANITIZE, in <var>.
#   A sanitized library preloaded into a program must come after the
#   sanitizer's runtime, so libasan/libtsan go first in LD_PRELOAD; that also
#   serves unsanitized programs the tests run (a shell). ASan additionally
#   gets verify_asan_link_order=0, for processes a test starts that preload
#   the shim alone (`fsdpshim run` puts it first). Also sets <var>_PATH, the
#   LD_PRELOAD value alone, for scripts that preload it themselves, and
#   <var>_OPTIONS, the sanitizer entries alone, for scripts whose commands
#   set LD_PRELOAD on their own.
function(fs_preload_env var)
  set(libs ${ARGN})
  if(NOT libs)
    set(libs "$<TARGET_FILE:fsdpshim>")
  endif()
  set(runtimes "")
  set(options "")
  foreach(san address thread)
    if(san IN_LIST FSDPSHIM_SANITIZE)
      string(REPLACE "address" "asan" rt "${san}")
      string(REPLACE "thread" "tsan" rt "${rt}")
      execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=lib${rt}.so
                      OUTPUT_VARIABLE rt_path OUTPUT_STRIP_TRAILING_WHITESPACE)
      list(APPEND runtimes "${rt_path}")
    endif()
  endforeach()
  if("address" IN_LIST FSDPSHIM_SANITIZE)
    list(APPEND options "ASAN_OPTIONS=verify_asan_link_order=0")
  endif()
  list(APPEND runtimes ${libs})
  string(REPLACE ";" ":" path "${runtimes}")
  set(${var} "LD_PRELOAD=${path}" ${options} PARENT_SCOPE)
  set(${var}_PATH "${path}" PARENT_SCOPE)
  set(${var}_OPTIONS ${options} PARENT_SCOPE)
endfunction()
