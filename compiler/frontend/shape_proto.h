/* xla.ShapeProto / LayoutProto (xla/xla_data.proto) -> HLO shape text, and the
 * PrimitiveType enum -> kiln's element types. Shared by the HloModuleProto reader and the
 * plugin's compile options (argument layouts).
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_SHAPE_PROTO_H_
#define KILN_COMPILER_FRONTEND_SHAPE_PROTO_H_

#include <stdbool.h>

#include "base/proto_wire.h"
#include "base/status.h"
#include "base/str.h"
#include "compiler/hlo/shape.h"

/* xla.PrimitiveType value -> kiln element type; false for values kiln has no type for
 * (S1, U1, BUFFER, PRIMITIVE_TYPE_INVALID, unknown numbers). */
bool kiln_elem_type_from_proto(int64_t primitive_type, kiln_elem_type_t *out);
/* The other way: kiln element type -> xla.PrimitiveType value; false for none. */
bool kiln_elem_type_to_proto(kiln_elem_type_t t, int64_t *out);

/* Reads the ShapeProto that `r` spans (a child reader from kiln_pw_sub) and appends its
 * HLO text with layout (e.g. "f32[2,<=3]{0,1:T(8,128)}", "(s32[], token[])") to `out`.
 * Unknown fields are skipped; an unknown element type, a dynamic-dimension list of the
 * wrong length or malformed bytes are INVALID_ARGUMENT naming the field and offset. */
kiln_status kiln_shape_proto_print(kiln_pw_reader_t *r, kiln_strbuf_t *out);
/* The same ShapeProto as a shape allocated in `arena`. */
kiln_status kiln_shape_from_proto(kiln_pw_reader_t *r, kiln_arena_t *arena, kiln_shape_t **out);

#endif /* KILN_COMPILER_FRONTEND_SHAPE_PROTO_H_ */
