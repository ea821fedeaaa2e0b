/* protobuf.h - a protocol buffers encoder, just enough to write Perfetto's
 * trace format (export_perfetto.c): varint and length-delimited fields and
 * nested messages, into a growing buffer.
 *
 * Why no library: protobuf-c (or upb, or nanopb) works from code generated
 * out of the .proto files, and Perfetto's schema is hundreds of messages
 * over a hundred files, of which the export writes a dozen; the wire format
 * itself is a page long. The caller names each field by its number, taken
 * from Perfetto's .proto files.
 *
 * A nested message opens with fs_pb_begin and closes with fs_pb_end; its
 * length, unknown until it ends, is then put in front of it in the fewest
 * bytes (the body moves when that takes more than one), so the bytes are
 * those any protobuf encoder writes. Out of memory ends the program
 * (fs_analysis_oom), as everywhere in the analyzer. */
#ifndef FS_PROTOBUF_H
#define FS_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

#define FS_PB_MAX_DEPTH 8 /* messages open at once */

typedef struct fs_pb {
    uint8_t *data;
    size_t len, cap;
    size_t open[FS_PB_MAX_DEPTH]; /* where each open message's body starts */
    int depth;
} fs_pb;

/* A varint field: uint32/64, bool, enum; int32/64 as two's complement. */
void fs_pb_uint(fs_pb *b, uint32_t field, uint64_t v);
void fs_pb_int(fs_pb *b, uint32_t field, int64_t v);
/* A length-delimited field: bytes, or a string (s's bytes, no NUL). */
void fs_pb_bytes(fs_pb *b, uint32_t field, const void *p, size_t n);
void fs_pb_str(fs_pb *b, uint32_t field, const char *s);
/* A nested message: its fields go between the two calls. */
void fs_pb_begin(fs_pb *b, uint32_t field);
void fs_pb_end(fs_pb *b);
/* m's bytes (fields written apart) appended to b as they are: fields of
 * the message open in b. */
void fs_pb_append(fs_pb *b, const fs_pb *m);

/* Empties b, keeping its memory; fs_pb_free returns it. */
void fs_pb_clear(fs_pb *b);
void fs_pb_free(fs_pb *b);

#endif /* FS_PROTOBUF_H */
