/* nccl_group.c - NCCL's groups (ncclGroupStart, ncclGroupEnd,
 * ncclGroupSimulateEnd) and what the shim defers to a group's end.
 *
 * Between ncclGroupStart and ncclGroupEnd NCCL only collects calls and
 * enqueues them all at the outermost ncclGroupEnd. Recording a use is
 * harmless early (events are recorded at the free, after the group), but
 * noting a stream's work before the work is on it would let a fence taken
 * in between miss it; so inside a group the (device, stream) pairs are kept
 * per thread and noted after the outermost ncclGroupEnd
 * (fs_nccl_group_note_work, for nccl.c's data-moving calls). A communicator
 * made inside a group is described to the shim at the group's end
 * (nccl_comm.c asks fs_nccl_group_depth). */
#include "nccl_internal.h"

#include <stdlib.h>

struct stream_note {
    int device;
    fs_stream_t stream;
};

/* Distinct (device, stream) pairs of the open group: a few inline, more on
 * the heap (freed when the group closes). */
#define GROUP_INLINE_NOTES 8

static FS_TLS struct {
    int depth;
    size_t len, cap;
    struct stream_note *notes; /* inline_notes, or a heap array */
    struct stream_note inline_notes[GROUP_INLINE_NOTES];
} group;

int fs_nccl_group_depth(void)
{
    return group.depth;
}

/* Keeps a note for the outermost ncclGroupEnd; false when memory ran out
 * (the caller then notes at once: early beats never). */
static bool group_keep_note(int device, fs_stream_t stream)
{
    if (!group.notes) {
        group.notes = group.inline_notes;
        group.cap = GROUP_INLINE_NOTES;
    }
    for (size_t i = 0; i < group.len; i++)
        if (group.notes[i].device == device && group.notes[i].stream == stream) return true;
    if (group.len == group.cap) {
        size_t cap = group.cap * 2;
        struct stream_note *grown = group.notes == group.inline_notes
                                        ? malloc(cap * sizeof(*grown))
                                        : realloc(group.notes, cap * sizeof(*grown));
        if (!grown) return false;
        if (group.notes == group.inline_notes)
            for (size_t i = 0; i < group.len; i++)
                grown[i] = group.inline_notes[i];
        group.notes = grown;
        group.cap = cap;
    }
    group.notes[group.len++] = (struct stream_note){device, stream};
    return true;
}

/* The outermost group has been enqueued: its streams have work now. */
static void group_flush_notes(void)
{
    fs_allocator *a = fs_shim_allocator();
    for (size_t i = 0; a && i < group.len; i++)
        fs_alloc_stream_note_work(a, group.notes[i].device, group.notes[i].stream);
    if (group.notes != group.inline_notes) free(group.notes);
    group.notes = NULL;
    group.len = group.cap = 0;
}

FS_EXPORT ncclResult_t ncclGroupStart(void)
{
    __typeof__(&ncclGroupStart) real = FS_NCCL_REAL(ncclGroupStart);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclGroupStart");
    if (!fs_shim_enter()) return real();
    ncclResult_t r = real();
    if (r == ncclSuccess) group.depth++;
    fs_shim_leave();
    return r;
}

/* NCCL leaves the group whatever the outcome (on an error the group's calls
 * are dropped); keeping our notes anyway only costs a fence event. */
static ncclResult_t group_end(ncclResult_t r)
{
    if (group.depth > 0 && --group.depth == 0) group_flush_notes();
    return r;
}

FS_EXPORT ncclResult_t ncclGroupEnd(void)
{
    __typeof__(&ncclGroupEnd) real = FS_NCCL_REAL(ncclGroupEnd);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclGroupEnd");
    if (!fs_shim_enter()) return real();
    ncclResult_t r = group_end(real());
    fs_shim_leave();
    return r;
}

/* The same group end, with NCCL's estimate of the time it would take. */
FS_EXPORT ncclResult_t ncclGroupSimulateEnd(ncclSimInfo_t *simInfo)
{
    __typeof__(&ncclGroupSimulateEnd) real = FS_NCCL_REAL(ncclGroupSimulateEnd);

    if (fs_unlikely(!real)) return fs_nccl_missing("ncclGroupSimulateEnd");
    if (!fs_shim_enter()) return real(simInfo);
    ncclResult_t r = group_end(real(simInfo));
    fs_shim_leave();
    return r;
}

void fs_nccl_group_note_work(fs_allocator *a, int device, fs_stream_t stream)
{
    if (group.depth == 0 || !group_keep_note(device, stream))
        fs_alloc_stream_note_work(a, device, stream);
}
