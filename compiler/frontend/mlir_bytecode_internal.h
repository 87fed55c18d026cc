/* Internals of the MLIR bytecode reader shared by its files: the reader state (one per
 * call: sections, string/dialect/op-name tables, lazily decoded attribute and type entries),
 * the primitive decoders (prefix varints, zigzag varints, bytes, strings) with errors that
 * name the section and the absolute byte offset, and the three stages:
 *   mlir_bytecode.c          container, sections, IR section -> generic IR (VHLO names)
 *   mlir_bytecode_attrs.c    builtin and VHLO attribute/type encodings -> generic attrs/types
 *   mlir_bytecode_upgrade.c  vhlo.*_vN ops -> the current StableHLO generic form
 * Not thread-safe per reader; every call has its own. */
#ifndef KILN_COMPILER_FRONTEND_MLIR_BYTECODE_INTERNAL_H_
#define KILN_COMPILER_FRONTEND_MLIR_BYTECODE_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"

/* MLIR's section ids (BytecodeFormat.md). */
enum {
  KILN_BC_SEC_STRING = 0,
  KILN_BC_SEC_DIALECT = 1,
  KILN_BC_SEC_ATTR_TYPE = 2,
  KILN_BC_SEC_ATTR_TYPE_OFFSET = 3,
  KILN_BC_SEC_IR = 4,
  KILN_BC_SEC_RESOURCE = 5,
  KILN_BC_SEC_RESOURCE_OFFSET = 6,
  KILN_BC_SEC_DIALECT_VERSIONS = 7,
  KILN_BC_SEC_PROPERTIES = 8,
  KILN_BC_NUM_SECTIONS = 9,
};

/* The newest bytecode container version kiln reads (MLIR's kNativePropertiesODSSegmentSize). */
#define KILN_BC_MAX_VERSION 6
/* The newest VHLO version kiln reads, as major*10000 + minor*100 + patch (1.20.0). */
#define KILN_VHLO_CURRENT 12000
#define KILN_VHLO_MINIMUM 900
/* Nesting limits: attributes/types referring to others, regions inside regions. */
#define KILN_BC_MAX_DEPTH 200
/* The largest constant (after splat expansion) kiln builds from bytecode. */
#define KILN_BC_MAX_LITERAL_BYTES (256 << 20)

typedef struct kiln_bc_entry {
  uint32_t dialect;
  bool custom; /* dialect encoding (else the textual form, NUL-terminated) */
  size_t off, len;
  uint8_t state; /* 0 unread, 1 being read (a cycle if met again), 2 done */
  const void *value;
} kiln_bc_entry_t;

typedef struct kiln_bc_opname {
  uint32_t dialect;
  const char *name; /* full: "vhlo.add_v1" */
  int registered;   /* -1 unknown (before bytecode version 5), else 0/1 */
  /* VHLO ops: the inherent attribute names of the properties encoding, split once. */
  bool props_split;
  int32_t num_props;
  const char **props;
} kiln_bc_opname_t;

typedef struct kiln_bc {
  kiln_mlir_module_t *m;
  kiln_arena_t *arena;
  const uint8_t *data;
  size_t size;
  uint64_t version;
  const char *producer;
  int64_t vhlo_version; /* major*10000+minor*100+patch, 0 if unknown */
  bool sec_present[KILN_BC_NUM_SECTIONS];
  size_t sec_off[KILN_BC_NUM_SECTIONS], sec_len[KILN_BC_NUM_SECTIONS];
  uint64_t num_strings;
  const char **strings;
  size_t *string_lens;
  uint64_t num_dialects;
  const char **dialects;
  size_t *dialect_ver_off, *dialect_ver_len; /* version payload; len 0 when none */
  uint64_t num_opnames;
  kiln_bc_opname_t *opnames;
  uint64_t num_attrs, num_types;
  kiln_bc_entry_t *attrs, *types;
  uint64_t num_props;
  size_t *prop_off; /* absolute offsets of each properties entry */
  int depth;
  kiln_mlir_value_t **vals; /* the value stack of the IR section (heap) */
  size_t nvals, capvals;
  /* Dialect resources (dialect_resources in text), in the order of the resource offset
   * section: what a resource handle (its index) names. */
  uint64_t num_resources;
  struct kiln_bc_resource {
    const char *key;
    uint64_t dialect;
    uint8_t kind;    /* 0 blob, 1 bool, 2 string */
    size_t off, len; /* a blob's data (absolute); len 0 when elided */
  } * resources;
  const kiln_mlir_type_t *int_types[65]; /* iN types made so far, by width (shared) */
  /* dense elements -> dense array conversions of the upgrade, by source attribute (heap,
   * open addressing; an attribute used by many ops is converted once) */
  struct kiln_bc_darr {
    const kiln_mlir_attr_t *from, *to;
    bool boolean;
  } * darr;
  size_t darr_n, darr_cap;
  /* op locations by location attribute (direct-mapped): ops share their location entries */
  const kiln_mlir_attr_t *loc_from[64];
  const char *loc_text[64];
} kiln_bc_t;

/* A cursor over [pos, end) of the file; `what` names the section for messages. */
typedef struct kiln_bc_reader {
  kiln_bc_t *bc;
  size_t pos, end;
  const char *what;
} kiln_bc_reader_t;

kiln_status kiln_bc_error(const kiln_bc_reader_t *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
kiln_bc_reader_t kiln_bc_sub(const kiln_bc_reader_t *r, size_t off, size_t len, const char *what);
kiln_status kiln_bc_byte(kiln_bc_reader_t *r, uint8_t *out);
kiln_status kiln_bc_varint_slow(kiln_bc_reader_t *r, uint64_t *out);
/* One-byte varints (most of them: small indices) inline, the rest out of line. */
static inline kiln_status kiln_bc_varint(kiln_bc_reader_t *r, uint64_t *out) {
  if (r->pos < r->end) {
    uint8_t first = r->bc->data[r->pos];
    if (first & 1) {
      *out = first >> 1;
      r->pos++;
      return KILN_STATUS_OK;
    }
  }
  return kiln_bc_varint_slow(r, out);
}
kiln_status kiln_bc_svarint(kiln_bc_reader_t *r, int64_t *out);
kiln_status kiln_bc_bytes(kiln_bc_reader_t *r, size_t n, const uint8_t **out);
/* A count that must fit in what is left (each item takes at least `min_item` bytes). */
kiln_status kiln_bc_count(kiln_bc_reader_t *r, size_t min_item, uint64_t *out);
kiln_status kiln_bc_string(kiln_bc_reader_t *r, const char **out, size_t *len);

/* Attribute / type number `index`, decoded on first use (mlir_bytecode_attrs.c). */
kiln_status kiln_bc_attr(kiln_bc_t *bc, uint64_t index, const kiln_mlir_attr_t **out);
kiln_status kiln_bc_type(kiln_bc_t *bc, uint64_t index, const kiln_mlir_type_t **out);
kiln_status kiln_bc_read_attr(kiln_bc_reader_t *r, const kiln_mlir_attr_t **out);
kiln_status kiln_bc_read_type(kiln_bc_reader_t *r, const kiln_mlir_type_t **out);

/* The VHLO op table (mlir_bytecode_vhlo_ops.inc): NULL if `name` (without "vhlo.") is not a
 * VHLO op; else its inherent attribute names, space-separated, and its version range. */
const char *kiln_bc_vhlo_op_attrs(const char *name, int64_t *min_version, int64_t *max_version);

/* Rewrites every vhlo.* op, attribute and type of the module into the current StableHLO
 * generic form (mlir_bytecode_upgrade.c). */
kiln_status kiln_bc_upgrade(kiln_bc_t *bc);

/* "<a>.<b>" in the module's arena (op names; cheaper than a formatted print). */
const char *kiln_bc_dotted(kiln_bc_t *bc, const char *a, const char *b);

/* Attribute constructors in the module's arena. */
kiln_mlir_attr_t *kiln_bc_new_attr(kiln_bc_t *bc, kiln_mlir_attr_kind_t kind);
kiln_mlir_type_t *kiln_bc_new_type(kiln_bc_t *bc, kiln_mlir_type_kind_t kind);
const kiln_mlir_type_t *kiln_bc_int_type(kiln_bc_t *bc, int width);

#endif /* KILN_COMPILER_FRONTEND_MLIR_BYTECODE_INTERNAL_H_ */
