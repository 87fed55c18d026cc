/* xla.LiteralProto (xla/xla_data.proto) -> a kiln literal: the values of a constant in an
 * HloModuleProto. Values are read from the field of the shape's element type (packed or
 * not) in the physical order of the shape's layout, as XLA writes them, and stored in
 * kiln's row-major literal storage.
 *
 * Thread-safety: thread-safe (no shared state). */
#ifndef KILN_COMPILER_FRONTEND_LITERAL_PROTO_H_
#define KILN_COMPILER_FRONTEND_LITERAL_PROTO_H_

#include "base/alloc.h"
#include "base/proto_wire.h"
#include "base/status.h"
#include "compiler/hlo/literal.h"

/* Reads the LiteralProto that `r` spans into a literal allocated in `arena`. A value count
 * that does not match the shape, a missing shape or an element type kiln lacks are
 * INVALID_ARGUMENT naming the field. */
kiln_status kiln_literal_from_proto(kiln_pw_reader_t *r, kiln_arena_t *arena, kiln_literal_t **out);

#endif /* KILN_COMPILER_FRONTEND_LITERAL_PROTO_H_ */
