/* reader.h - reading trace files (docs/trace-format.md), for every command
 * of the analyzer.
 *
 * One reading loop: fs_reader_read walks a file's blocks in order, keeps the
 * definitions (strings, stacks, Python stacks, annotation stacks, modules,
 * threads, rank, dropped counts) in tables, and hands every record to the
 * caller's visitor, definitions after they are stored. Memory grows with
 * the definitions, never with the number of events. A block that is torn or
 * corrupt is skipped, named with its byte offset through the warning
 * callback, and reading goes on at the next block; a file cut inside a
 * block is read up to the cut. */
#ifndef FS_READER_H
#define FS_READER_H

#include "format.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct fs_reader fs_reader;

typedef struct fs_reader_module {
    uint64_t base, size;
    uint32_t path; /* string id */
    uint8_t build_id[64];
    uint32_t build_id_len;
} fs_reader_module;

/* What reading a file found wrong, for the summary line of a command. */
typedef struct fs_reader_damage {
    uint64_t skipped_blocks; /* corrupt blocks left out */
    uint64_t skipped_bytes;  /* bytes not read: corrupt blocks, garbage, a torn tail */
    uint64_t dropped_events; /* the writer's own count of events it could not write */
} fs_reader_damage;

/* Opens a trace. NULL with a one-line message in err (naming the file) for
 * a file that cannot be read or is not a trace of a format this reader
 * knows. */
fs_reader *fs_reader_open(const char *path, char *err, size_t errlen);
void fs_reader_close(fs_reader *t);

const char *fs_reader_file(const fs_reader *t);
const fs_fmt_header *fs_reader_header(const fs_reader *t);

/* Called for each record, in file order, with the thread that wrote it (0
 * for definitions). Return nonzero to stop reading. */
typedef int (*fs_reader_visit)(void *ctx, fs_reader *t, const fs_fmt_record *r, uint32_t tid);

/* Called once per problem: "FILE: offset N: what". */
typedef void (*fs_reader_warn)(void *ctx, const char *line);

/* Reads the whole file. Returns the number of records read (0: nothing
 * readable); the damage found is kept (fs_reader_damage_of). */
uint64_t fs_reader_read(fs_reader *t, fs_reader_visit visit, fs_reader_warn warn, void *ctx);
const fs_reader_damage *fs_reader_damage_of(const fs_reader *t);
/* As t is read, the file's bytes it moves past are added to *bytes (from
 * any thread; a progress display reads it): each byte once, the whole file
 * by the end of a reading. NULL stops the counting. */
void fs_reader_count_into(fs_reader *t, _Atomic uint64_t *bytes);
/* Whether any trace this process read was damaged (a block skipped, a
 * record that does not decode, a torn tail): the CLI then exits 1, after
 * whatever the command made of the rest (docs/cli.md). */
bool fs_reader_saw_damage(void);

/* As fs_reader_read, but events (and snapshot entries) reach the visitor in
 * time order, ties in file order, while definitions still come as they are
 * read (in blocks of their own, as the writer puts them), ahead of any
 * event that names them. Each thread's events are in order in the file,
 * but threads' buffers reach the file at different moments (each when
 * full, or at the writer's 50 ms cycle), so a block freed by one thread and
 * handed to another can appear freed after its reuse: commands that follow
 * blocks by address read in time order. Blocks of FS_READER_ORDER_WINDOW
 * payload bytes are held back (about 800,000 events, the writer's cycle at
 * well over ten million events a second): memory stays bounded whatever
 * the trace's length. */
#define FS_READER_ORDER_WINDOW (8u << 20)
uint64_t fs_reader_read_ordered(fs_reader *t, fs_reader_visit visit, fs_reader_warn warn,
                                void *ctx);

/* Definitions, as read so far. Unknown ids give NULL / 0. */
const char *fs_reader_string(const fs_reader *t, uint32_t id, uint32_t *len);
uint32_t fs_reader_stack(const fs_reader *t, uint32_t id, const uint64_t **frames);
uint32_t fs_reader_pystack(const fs_reader *t, uint32_t id, const fs_fmt_pyframe **frames);
/* The annotation node: its parent, domain and name string ids. */
bool fs_reader_annot(const fs_reader *t, uint32_t id, uint32_t *parent, uint32_t *domain,
                     uint32_t *name);
/* Annotation node id's stack into chain, the root first; its depth (0 for
 * node 0 or an unknown one). At most the FS_READER_MAX_NESTING innermost
 * nodes are followed, which also ends a cycle in a damaged trace. */
#define FS_READER_MAX_NESTING 128
int fs_reader_annot_chain(const fs_reader *t, uint32_t id, uint32_t chain[FS_READER_MAX_NESTING]);
/* The module containing address pc, and pc's offset in it. */
const fs_reader_module *fs_reader_module_of(const fs_reader *t, uint64_t pc, uint64_t *offset);
/* The rank: from the header, or the FS_REC_RANK record once read; -1. */
int fs_reader_rank(const fs_reader *t);
/* The allocator's configuration as the recording ran with it
 * (fs_alloc_config_set's keys), once its FS_REC_CONFIG record is read;
 * NULL for a trace that does not say (format version 1). */
const char *fs_reader_config(const fs_reader *t);
/* A device's total memory, once its FS_REC_DEVICE record is read; 0 when
 * not known. */
uint64_t fs_reader_device_total(const fs_reader *t, int device);
/* The name thread tid had when it first wrote an event (its FS_REC_THREAD
 * record: the kernel's name, 15 bytes at most, "" when it had none); NULL
 * for a thread not defined. */
const char *fs_reader_thread_name(const fs_reader *t, uint32_t tid);

#endif /* FS_READER_H */
