/* Device buffers, slices and buffer tables (buffer.h). */
#include "runtime/buffer.h"

#include <inttypes.h>

#include "base/alloc.h"

kiln_status kiln_device_buffer_create(kiln_device_t *dev, uint64_t size,
                                      kiln_device_buffer_t **out) {
  if (!dev || !out) return KILN_ERR_INVALID("buffer create: NULL device or out");
  *out = NULL;
  if (size > SIZE_MAX) return kiln_status_make(KILN_RESOURCE_EXHAUSTED, "buffer too large");
  kiln_device_buffer_t *b = kiln_try_calloc(1, sizeof(*b));
  if (!b) return KILN_ERR_EXHAUSTED("out of host memory for a buffer record on %s", dev->name);
  kiln_devptr_t p = 0;
  kiln_status s = kiln_device_mem_alloc(dev, (size_t)size, &p);
  if (s) {
    kiln_free(b);
    return kiln_status_annotate(s, "while allocating a %" PRIu64 "-byte buffer on %s", size,
                                dev->name);
  }
  b->device = dev;
  b->ptr = p;
  b->size = size;
  b->owned = true;
  *out = b;
  return NULL;
}

kiln_status kiln_device_buffer_wrap(kiln_device_t *dev, kiln_devptr_t ptr, uint64_t size,
                                    kiln_device_buffer_t **out) {
  if (!dev || !out) return KILN_ERR_INVALID("buffer wrap: NULL device or out");
  *out = NULL;
  if (!ptr && size)
    return KILN_ERR_INVALID("buffer wrap: NULL address for %" PRIu64 " bytes", size);
  kiln_device_buffer_t *b = kiln_try_calloc(1, sizeof(*b));
  if (!b) return KILN_ERR_EXHAUSTED("out of host memory for a buffer record on %s", dev->name);
  b->device = dev;
  b->ptr = ptr;
  b->size = size;
  b->owned = false;
  *out = b;
  return NULL;
}

void kiln_device_buffer_destroy(kiln_device_buffer_t *b) {
  if (!b) return;
  if (b->owned) kiln_device_mem_free(b->device, b->ptr);
  kiln_free(b);
}

kiln_status kiln_buffer_table_init(kiln_buffer_table_t *t, kiln_device_t *dev, int32_t num) {
  if (num < 0) num = 0;
  size_t n = num ? (size_t)num : 1;
  t->device = dev;
  t->bases = kiln_try_calloc(n, sizeof(kiln_devptr_t));
  t->sizes = kiln_try_calloc(n, sizeof(uint64_t));
  t->owned = kiln_try_calloc(n, sizeof(kiln_device_buffer_t *));
  t->num = num;
  if (!t->bases || !t->sizes || !t->owned) {
    kiln_buffer_table_free(t);
    return KILN_ERR_EXHAUSTED("out of host memory for a table of %d buffers", num);
  }
  return NULL;
}

void kiln_buffer_table_free(kiln_buffer_table_t *t) {
  for (int32_t i = 0; t->owned && i < t->num; i++) kiln_device_buffer_destroy(t->owned[i]);
  kiln_free(t->bases);
  kiln_free(t->sizes);
  kiln_free(t->owned);
  t->bases = NULL;
  t->sizes = NULL;
  t->owned = NULL;
  t->num = 0;
}

kiln_status kiln_buffer_table_bind(kiln_buffer_table_t *t, int32_t i, kiln_devptr_t base,
                                   uint64_t size) {
  if (i < 0 || i >= t->num)
    return KILN_ERR_INVALID("buffer table: allocation %d out of range [0, %d)", i, t->num);
  if (!base && size) return KILN_ERR_INVALID("buffer table: NULL base for allocation %d", i);
  kiln_device_buffer_destroy(t->owned[i]);
  t->owned[i] = NULL;
  t->bases[i] = base;
  t->sizes[i] = size;
  return NULL;
}

kiln_status kiln_buffer_table_allocate(kiln_buffer_table_t *t, int32_t i, uint64_t size) {
  if (i < 0 || i >= t->num)
    return KILN_ERR_INVALID("buffer table: allocation %d out of range [0, %d)", i, t->num);
  kiln_device_buffer_t *b = NULL;
  KILN_RETURN_IF_ERROR(kiln_device_buffer_create(t->device, size, &b), "for allocation %d", i);
  kiln_device_buffer_destroy(t->owned[i]);
  t->owned[i] = b;
  t->bases[i] = b->ptr;
  t->sizes[i] = size;
  return NULL;
}

kiln_status kiln_buffer_table_resolve(const kiln_buffer_table_t *t, kiln_slice_t s,
                                      kiln_devptr_t *out) {
  *out = 0;
  if (s.allocation < 0 || s.allocation >= t->num)
    return KILN_ERR_INVALID("slice names allocation %d; the table has %d", s.allocation, t->num);
  if (!t->bases[s.allocation])
    return KILN_ERR_INVALID("slice names allocation %d, which is not bound", s.allocation);
  if (s.offset < 0 || s.size < 0 || (uint64_t)s.offset > t->sizes[s.allocation] ||
      (uint64_t)s.size > t->sizes[s.allocation] - (uint64_t)s.offset)
    return KILN_ERR_INVALID("slice [%" PRId64 ", +%" PRId64
                            ") does not fit allocation %d of %" PRIu64 " bytes",
                            s.offset, s.size, s.allocation, t->sizes[s.allocation]);
  *out = t->bases[s.allocation] + (uint64_t)s.offset;
  return NULL;
}
