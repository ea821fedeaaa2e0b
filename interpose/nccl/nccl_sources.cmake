# nccl_sources.cmake - the NCCL half of libfsdpshim.so (included by
# interpose/CMakeLists.txt): NCCL entry points, communicator and registration
# bookkeeping, and the all-gather rate limiter. See docs/collectives.md.
set(FS_INTERPOSE_NCCL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/nccl.c
  ${CMAKE_CURRENT_LIST_DIR}/nccl_comm.c
  ${CMAKE_CURRENT_LIST_DIR}/nccl_group.c
  ${CMAKE_CURRENT_LIST_DIR}/nccl_ptrmap.c
  ${CMAKE_CURRENT_LIST_DIR}/nccl_real.c
  ${CMAKE_CURRENT_LIST_DIR}/nccl_register.c
  ${CMAKE_CURRENT_LIST_DIR}/rate_limiter.c
)
