/* The MLIR text reader's internals (compiler/frontend/mlir_*.c only).
 *
 * The parser is a cursor over the characters; there is no separate token stream, because
 * MLIR's grammar lexes differently by context (`4x?xf32` in a tensor type, `0x7FC00000` as a
 * float's bits, `[b, 0, 1, f]x[0, 1, i, o]->[...]` in a convolution). Errors are sticky: the
 * first one is kept and every function returns false once one is set. Line and column are
 * computed only for messages and for each op's `line` (a monotone cursor, so linear). */
#ifndef KILN_COMPILER_FRONTEND_MLIR_TEXT_INTERNAL_H_
#define KILN_COMPILER_FRONTEND_MLIR_TEXT_INTERNAL_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "compiler/frontend/mlir_ir.h"

#define KILN_MLIRP_MAX_DEPTH 200 /* nesting of regions, attributes and types */
/* The largest dense<> literal (a splat can describe far more than its text). */
#define KILN_MLIRP_MAX_LITERAL_BYTES ((int64_t)1 << 30)

typedef struct kiln_mlirp_sym {
  kiln_mlir_value_t *values; /* values: count results (or one block argument) */
  int32_t count;
  const kiln_mlir_attr_t *attr; /* attribute alias */
  const kiln_mlir_type_t *type; /* type alias */
  const char *loc_text;         /* location alias (#loc3 = loc(...)) */
  int32_t rec;                  /* its name's record */
  int32_t prev;                 /* the binding this one shadows, or -1 */
} kiln_mlirp_sym_t;

/* Names map (open addressing) to permanent records; each record points at its newest
 * binding; bindings form a stack that scopes pop. */
typedef struct kiln_mlirp_name {
  const char *name; /* "%x" or "#alias" / "!alias": points into the input */
  size_t len;
  int32_t current; /* binding, or -1 */
} kiln_mlirp_name_t;

typedef struct kiln_mlirp_table {
  int32_t *slots; /* record index, -1 empty */
  uint32_t cap;
  kiln_mlirp_name_t *recs;
  int32_t num_recs, recs_cap;
  kiln_mlirp_sym_t *entries; /* bindings */
  int32_t num, entries_cap;
} kiln_mlirp_table_t;

typedef struct kiln_mlirp {
  const char *base, *p, *end;
  const char *filename;
  kiln_mlir_module_t *m;
  kiln_arena_t *a;
  kiln_status err;
  int depth;
  const char *line_pos; /* line cursor: line_no is the line of line_pos */
  int32_t line_no;
  int32_t first_line;         /* the line number of `base` (a part of a split file) */
  kiln_mlirp_table_t values;  /* SSA names, scoped (see scope_push/pop) */
  kiln_mlirp_table_t aliases; /* #name / !name */
  kiln_mlirp_table_t types;   /* tensor types by their text: each distinct one built once */
  int32_t *scope_marks;
  int32_t num_scopes, scopes_cap;
  kiln_mlir_attr_t **dense_resources; /* dense_resource<key> attributes (OTHER until resolved) */
  int32_t num_dense_resources, dense_resources_cap;
  const char **blob_keys, **blob_hex; /* the builtin dialect's resources: key, "0x..." text */
  size_t *blob_key_lens, *blob_hex_lens;
  int32_t num_blobs, blobs_cap;
} kiln_mlirp_t;

/* An op being built. */
typedef struct kiln_mlirp_op {
  const char *name;
  kiln_mlir_value_t **operands;
  int32_t num_operands, operands_cap;
  int32_t num_results; /* from the `%a, %b:2 =` binding */
  const kiln_mlir_type_t **result_types;
  int32_t num_result_types;
  kiln_mlir_named_attr_t *attrs;
  int32_t num_attrs, attrs_cap;
  kiln_mlir_region_t *regions;
  int32_t num_regions, regions_cap;
  const char *location;
  int32_t line;
} kiln_mlirp_op_t;

/* Lexing (mlir_lexer.c). */
bool kiln_mlirp_fail(kiln_mlirp_t *P, const char *what); /* "expected <what>, found ..." */
bool kiln_mlirp_failf(kiln_mlirp_t *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool kiln_mlirp_fail_at(kiln_mlirp_t *P, const char *at, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int32_t kiln_mlirp_line_of(kiln_mlirp_t *P, const char *at);
void kiln_mlirp_ws(kiln_mlirp_t *P);
char kiln_mlirp_peek(kiln_mlirp_t *P);  /* next significant char or 0 */
char kiln_mlirp_peek2(kiln_mlirp_t *P); /* the one after it, or 0 */
bool kiln_mlirp_accept(kiln_mlirp_t *P, char c);
bool kiln_mlirp_accept_str(kiln_mlirp_t *P, const char *s); /* punctuation like "->" */
bool kiln_mlirp_expect(kiln_mlirp_t *P, char c);
bool kiln_mlirp_expect_str(kiln_mlirp_t *P, const char *s);
bool kiln_mlirp_is_id_start(char c);
bool kiln_mlirp_is_id_char(char c); /* letters, digits, _ $ . */
/* A bare identifier [a-zA-Z_][a-zA-Z0-9_$.]*; false (no error) if none. */
bool kiln_mlirp_bare_id(kiln_mlirp_t *P, const char **s, size_t *n);
bool kiln_mlirp_peek_kw(kiln_mlirp_t *P, const char *kw);
bool kiln_mlirp_accept_kw(kiln_mlirp_t *P, const char *kw);
bool kiln_mlirp_expect_kw(kiln_mlirp_t *P, const char *kw);
/* A `"..."` literal with escapes decoded into the arena (NUL-terminated; len excludes it). */
bool kiln_mlirp_string(kiln_mlirp_t *P, const char **out, size_t *len);
/* The same, but a string without escapes is returned in place (its text in the input: not
 * NUL-terminated), without a copy. */
bool kiln_mlirp_string_span(kiln_mlirp_t *P, const char **out, size_t *len);
/* The same for a quoted name (op, attribute, symbol): a NUL byte in it is an error. */
bool kiln_mlirp_name_string(kiln_mlirp_t *P, const char **out, size_t *len);
/* An integer literal (decimal, or 0x hex), optional leading '-'. */
bool kiln_mlirp_integer(kiln_mlirp_t *P, int64_t *out);
/* A number token: sets is_float, is_hex; text span. Leading '-' allowed. */
typedef struct kiln_mlirp_num {
  const char *s;
  size_t n;
  bool neg, is_float, is_hex, is_special; /* special: inf / nan */
} kiln_mlirp_num_t;
bool kiln_mlirp_number(kiln_mlirp_t *P, kiln_mlirp_num_t *num);
int64_t kiln_mlirp_num_i64(const kiln_mlirp_num_t *num, bool *overflow);
uint64_t kiln_mlirp_num_u64bits(const kiln_mlirp_num_t *num); /* hex bits */
double kiln_mlirp_num_f64(const kiln_mlirp_num_t *num);
/* Skips a balanced <...>, (...), [...] or {...} group starting at the cursor (strings
 * skipped whole); leaves the cursor after it. */
bool kiln_mlirp_skip_balanced(kiln_mlirp_t *P);
char *kiln_mlirp_dup(kiln_mlirp_t *P, const char *s, size_t n);

/* Symbol tables (mlir_lexer.c). */
kiln_mlirp_sym_t *kiln_mlirp_lookup(kiln_mlirp_table_t *t, const char *name, size_t len);
kiln_mlirp_sym_t *kiln_mlirp_define(kiln_mlirp_table_t *t, const char *name, size_t len);
void kiln_mlirp_table_free(kiln_mlirp_table_t *t);
void kiln_mlirp_scope_push(kiln_mlirp_t *P);
void kiln_mlirp_scope_pop(kiln_mlirp_t *P);

/* Types and attributes (mlir_types.c, mlir_attrs.c). */
bool kiln_mlirp_type(kiln_mlirp_t *P, const kiln_mlir_type_t **out);
bool kiln_mlirp_type_list_parens(kiln_mlirp_t *P, const kiln_mlir_type_t ***out, int32_t *n);
bool kiln_mlirp_elem_of(const kiln_mlir_type_t *t, kiln_elem_type_t *out);
kiln_mlir_type_t *kiln_mlirp_new_type(kiln_mlirp_t *P, kiln_mlir_type_kind_t kind);
const kiln_mlir_type_t *kiln_mlirp_int_type(kiln_mlirp_t *P, int32_t width,
                                            kiln_mlir_signedness_t s);
const kiln_mlir_type_t *kiln_mlirp_scalar_tensor(kiln_mlirp_t *P, const kiln_mlir_type_t *elem);
bool kiln_mlirp_attr(kiln_mlirp_t *P, const kiln_mlir_attr_t **out);
bool kiln_mlirp_attr_dict(kiln_mlirp_t *P, kiln_mlir_named_attr_t **out, int32_t *n);
kiln_mlir_attr_t *kiln_mlirp_new_attr(kiln_mlirp_t *P, kiln_mlir_attr_kind_t kind);
const kiln_mlir_attr_t *kiln_mlirp_i64_attr(kiln_mlirp_t *P, int64_t v, int32_t width);
const kiln_mlir_attr_t *kiln_mlirp_dense_i64(kiln_mlirp_t *P, const int64_t *v, int32_t n);
const kiln_mlir_attr_t *kiln_mlirp_enum_attr(kiln_mlirp_t *P, const char *dialect,
                                             const char *enum_name, const char *value);
/* `[1, 2, ?]` as a DENSE_ARRAY of i64 (`?` = KILN_MLIR_DYNAMIC). */
bool kiln_mlirp_int_list(kiln_mlirp_t *P, const kiln_mlir_attr_t **out);
/* The body of a #dialect.name<...> struct after `<` (through `>`). */
bool kiln_mlirp_struct_body(kiln_mlirp_t *P, const char *name, const kiln_mlir_attr_t **out);
bool kiln_mlirp_conv_dims_pretty(kiln_mlirp_t *P, const kiln_mlir_attr_t **out);
/* A location `loc(...)` at the cursor: its inner text (alias references resolved at the
 * end); false without error if there is none. */
bool kiln_mlirp_location(kiln_mlirp_t *P, const char **out);

/* The file metadata section `{-# dialect_resources: {builtin: {key: "0x..."}} ... #-}` at the
 * cursor: the builtin dialect's blobs are kept, the rest skipped. */
bool kiln_mlirp_file_metadata(kiln_mlirp_t *P);
/* After the whole file: each dense_resource<key> whose builtin blob is in the file becomes
 * dense elements (the blob's hex: a 4-byte little-endian alignment, then the data, whose
 * size must be the type's); without one it stays OTHER text. */
bool kiln_mlirp_resolve_dense_resources(kiln_mlirp_t *P);

/* Ops (mlir_text.c, mlir_pretty.c). */
bool kiln_mlirp_region(kiln_mlirp_t *P, kiln_mlir_region_t *r,
                       const kiln_mlir_type_t *const *arg_types, int32_t num_args,
                       const char *const *arg_names, const size_t *arg_name_lens);
bool kiln_mlirp_value_use(kiln_mlirp_t *P, kiln_mlir_value_t **out);
bool kiln_mlirp_peek_value_use(kiln_mlirp_t *P); /* a `%x` that is not a new binding */
void kiln_mlirp_op_add_operand(kiln_mlirp_t *P, kiln_mlirp_op_t *op, kiln_mlir_value_t *v);
void kiln_mlirp_op_add_attr(kiln_mlirp_t *P, kiln_mlirp_op_t *op, const char *name,
                            const kiln_mlir_attr_t *v);
kiln_mlir_region_t *kiln_mlirp_op_add_region(kiln_mlirp_t *P, kiln_mlirp_op_t *op);
bool kiln_mlirp_op_attr_dict(kiln_mlirp_t *P, kiln_mlirp_op_t *op); /* optional {..} */
/* `: type-signature` in any pretty form; sets the result types. */
bool kiln_mlirp_op_signature(kiln_mlirp_t *P, kiln_mlirp_op_t *op);
/* The rest of a generic op after its name: `(operands) <{props}> (regions) {attrs} : fn`. */
bool kiln_mlirp_generic_tail(kiln_mlirp_t *P, kiln_mlirp_op_t *op);
bool kiln_mlirp_pretty_op(kiln_mlirp_t *P, kiln_mlirp_op_t *op);

#endif /* KILN_COMPILER_FRONTEND_MLIR_TEXT_INTERNAL_H_ */
