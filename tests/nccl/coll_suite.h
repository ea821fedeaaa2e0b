/* coll_suite.h - the collective checks shared by the threads and the
 * processes test programs.
 *
 * A suite drives some local ranks of one communicator: all of them from one
 * thread (ranks as threads, through groups) or just one (ranks as
 * processes). Every operation is called inside ncclGroupStart/End for the
 * local ranks, so the same code serves both. */
#ifndef FS_COLL_SUITE_H
#define FS_COLL_SUITE_H

#include <cuda_runtime_api.h>
#include <nccl.h>

#define SUITE_MAX 8

struct suite {
    int nranks;          /* ranks in the communicator */
    int nlocal;          /* ranks this thread drives */
    int rank[SUITE_MAX]; /* their ranks */
    ncclComm_t comm[SUITE_MAX];
    cudaStream_t stream[SUITE_MAX];
};

/* Runs every check; exits 1 on the first mismatch. */
void suite_run(struct suite *s);

/* Creates a stream for each local rank on its communicator's device. */
void suite_streams(struct suite *s);

#endif /* FS_COLL_SUITE_H */
