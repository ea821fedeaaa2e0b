/* stack.h - native backtraces and the stack table (trace/stack.c), and the
 * module map (trace/modules.c).
 *
 * A stack is captured with libunwind's fast path, interned in a table so that
 * a repeated stack costs one id, and defined in the trace (FS_REC_STACK)
 * once. Frames stay raw return addresses: the module map (FS_REC_MODULE:
 * path, build id, load address of every loaded object, including those loaded
 * after start) lets the reader symbolise offline. */
#ifndef FS_STACK_H
#define FS_STACK_H

#include <stdbool.h>
#include <stdint.h>

/* Captures the calling thread's stack, leaving out its innermost frames
 * inside the object that contains this function (the shim's own entry
 * point and glue), keeping at most `max_frames`, and returns its id
 * (defining it in the trace on first sight; module records for objects
 * loaded since the last capture are defined first). 0 when stacks are not
 * being traced or nothing could be captured. Takes no allocator lock; safe
 * from any thread. */
uint32_t fs_stack_capture(unsigned max_frames);

/* As fs_stack_capture, and then leaves out the innermost frames for which
 * skip(ip) is true: a caller that is called back by a library (CUPTI,
 * through the CUDA runtime and driver) drops that library's frames, so that
 * the stack starts at the program's call. */
uint32_t fs_stack_capture_skipping(unsigned max_frames, bool (*skip)(uintptr_t ip));

/* Leading frames in the code of the object containing `code` (loaded by
 * the shim: the PyTorch adapter) are the product's as well, and left out
 * of every stack captured from now on, as the shim's own are. */
void fs_stack_skip_object(const void *code);

/* Copies the frames of stack `id` into out (at most max); returns how many,
 * 0 for an unknown id. For snapshot files, which repeat the definitions of
 * the stacks they name. */
uint32_t fs_stack_frames(uint32_t id, uint64_t *out, uint32_t max);

/* Defines every loaded object in the trace (FS_REC_MODULE); called when
 * the trace starts, and again by fs_stack_capture when objects were loaded. */
void fs_modules_define(void);

/* Defines the objects loaded or unloaded since the last call; cheap when
 * nothing changed (one dl_iterate_phdr step). */
void fs_modules_refresh(void);

#endif /* FS_STACK_H */
