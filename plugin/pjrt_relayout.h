/* Dense layouts of PJRT buffers and the relayout of an execute's argument.
 *
 * A buffer's device layout is a dense minor_to_major permutation (pjrt_objects.h). An
 * executable takes each parameter leaf in the layout its compiled module gives it (the
 * module's own or the compile options' argument layout, pjrt_executable.h). XLA requires an
 * argument to arrive in that layout; kiln also accepts one in another dense layout and copies
 * it into a temporary in the parameter's layout for the run (a transpose on the host; through
 * host memory on a GPU), which the caller frees after the run. Frontends avoid the copy by
 * uploading in the executable's layout (its OptimizedProgram's entry_computation_layout).
 *
 * Thread-safety: thread-safe (no state). */
#ifndef KILN_PLUGIN_PJRT_RELAYOUT_H_
#define KILN_PLUGIN_PJRT_RELAYOUT_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/status.h"
#include "plugin/pjrt_objects.h"
#include "runtime/buffer.h"
#include "runtime/device.h"

/* A caller's layout (`what` names it in errors; `fn` the entry point) as a dense minor_to_major
 * permutation into m2m (rank entries): Tiled with no tiles or only trivial ones, or Strides of
 * a dense array of `elem`-byte elements; anything else INVALID_ARGUMENT or UNIMPLEMENTED. */
kiln_status kiln_pjrt_parse_layout(const char *fn, const char *what,
                                   const PJRT_Buffer_MemoryLayout *l, int32_t rank,
                                   const int64_t *dims, size_t elem, int64_t *m2m);
/* Byte strides of a dense array of `elem`-byte elements in layout `m2m`. */
void kiln_pjrt_m2m_strides(int32_t rank, const int64_t *dims, const int64_t *m2m, size_t elem,
                           int64_t *strides);
/* True when layouts `a` and `b` place every element of an array of `dims` at the same offset
 * (they differ at most in the order of dimensions of size 1). */
bool kiln_pjrt_m2m_same_placement(int32_t rank, const int64_t *dims, const int64_t *a,
                                  const int64_t *b);
/* Copies a rank-`rank` array of `elem`-byte elements between two strided places (host
 * memory). */
void kiln_pjrt_copy_strided(char *dst, const int64_t *dst_strides, const char *src,
                            const int64_t *src_strides, const int64_t *dims, int32_t rank,
                            size_t elem);
/* A new device buffer on `dev` holding argument `b` (its memory at `src`, held by the caller)
 * in layout `dst_m2m`; `stream` is one of `dev`'s, idle. The caller destroys *out. */
kiln_status kiln_pjrt_relayout(PJRT_Device *dev, kiln_stream_t *stream, const PJRT_Buffer *b,
                               kiln_devptr_t src, const int64_t *dst_m2m,
                               kiln_device_buffer_t **out);

#endif /* KILN_PLUGIN_PJRT_RELAYOUT_H_ */
