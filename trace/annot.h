/* annot.h - per-thread annotation stacks (trace/annot.c): NVTX ranges
 * (interpose/nvtx/nvtx.c, the NVTX injection library) and the public API's
 * fsdpshim_annotation_push/pop land in the same per-thread stacks.
 *
 * A stack is a node of a tree (parent, domain, name) interned into an id, so
 * that an event carries its whole annotation stack as one number and a
 * repeated stack costs nothing. Ranges of different NVTX domains share the
 * thread's stack, each node naming its domain. */
#ifndef FS_ANNOT_H
#define FS_ANNOT_H

#include <stddef.h>
#include <stdint.h>

/* Pushes `name` (len bytes; copied) of `domain` (NULL: the default domain)
 * on the calling thread's stack and, when tracing, writes an
 * FS_REC_ANNOT_PUSH event. Returns the new depth, -1 when out of memory. */
int fs_annot_push(const char *domain, const char *name, size_t len);

/* Pops the innermost range of `domain` (NULL: the default domain) off the
 * calling thread's stack and writes an FS_REC_ANNOT_POP event. Returns the
 * depth left, or -1 when that domain has nothing pushed (NVTX's rule). */
int fs_annot_pop(const char *domain);

/* An NVTX mark: an FS_REC_ANNOT_MARK event naming `message`. */
void fs_annot_mark(const char *domain, const char *message, size_t len);

/* The id of the calling thread's current annotation stack (FS_REC_ANNOT),
 * 0 when it is empty or tracing is off. Cheap: producers call it per event. */
uint32_t fs_annot_current(void);

#endif /* FS_ANNOT_H */
