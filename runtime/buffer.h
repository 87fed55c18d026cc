/* Device buffers and slices.
 *
 * A kiln_device_buffer_t is one device allocation (owned) or a view of someone else's memory
 * (wrapped, not freed). Thunks name memory as slices — (allocation index, offset, size) from
 * buffer assignment — and resolve them against a kiln_buffer_table_t, the base address of
 * each allocation for one execution. Resolution checks bounds, so a bad slice is an error
 * instead of a write past an allocation.
 *
 * Thread-safety: not thread-safe: callers serialize. A buffer table belongs to one execution
 * (executables give each run its own); resolving against a table nobody modifies may happen
 * from several threads. */
#ifndef KILN_RUNTIME_BUFFER_H_
#define KILN_RUNTIME_BUFFER_H_

#include <stdbool.h>
#include <stdint.h>

#include "base/status.h"
#include "runtime/device.h"

typedef struct kiln_device_buffer {
  kiln_device_t *device;
  kiln_devptr_t ptr;
  uint64_t size;
  bool owned;
} kiln_device_buffer_t;

/* Allocates `size` bytes on `dev`. The caller owns *out (kiln_device_buffer_destroy). */
kiln_status kiln_device_buffer_create(kiln_device_t *dev, uint64_t size,
                                      kiln_device_buffer_t **out);
/* Wraps memory owned elsewhere (e.g. a caller's parameter); destroy frees only the wrapper. */
kiln_status kiln_device_buffer_wrap(kiln_device_t *dev, kiln_devptr_t ptr, uint64_t size,
                                    kiln_device_buffer_t **out);
void kiln_device_buffer_destroy(kiln_device_buffer_t *b);

typedef struct kiln_slice {
  int32_t allocation; /* index into the buffer table */
  int64_t offset;
  int64_t size; /* bytes */
} kiln_slice_t;

static inline kiln_slice_t kiln_slice_make(int32_t allocation, int64_t offset, int64_t size) {
  kiln_slice_t s = {allocation, offset, size};
  return s;
}

/* Base address and size of every allocation for one execution. */
typedef struct kiln_buffer_table {
  int32_t num;
  kiln_devptr_t *bases;
  uint64_t *sizes;
  kiln_device_buffer_t **owned; /* buffers allocated by kiln_buffer_table_allocate */
  kiln_device_t *device;
} kiln_buffer_table_t;

kiln_status kiln_buffer_table_init(kiln_buffer_table_t *t, kiln_device_t *dev, int32_t num);
/* Frees the buffers the table allocated, then the table's arrays. */
void kiln_buffer_table_free(kiln_buffer_table_t *t);
/* Binds allocation i to memory owned elsewhere. */
kiln_status kiln_buffer_table_bind(kiln_buffer_table_t *t, int32_t i, kiln_devptr_t base,
                                   uint64_t size);
/* Allocates a device buffer of `size` bytes for allocation i (replacing an earlier one the
 * table allocated). */
kiln_status kiln_buffer_table_allocate(kiln_buffer_table_t *t, int32_t i, uint64_t size);
/* The address of `s`; INVALID_ARGUMENT when the allocation is unknown or unbound or the slice
 * does not fit in it. */
kiln_status kiln_buffer_table_resolve(const kiln_buffer_table_t *t, kiln_slice_t s,
                                      kiln_devptr_t *out);

#endif /* KILN_RUNTIME_BUFFER_H_ */
