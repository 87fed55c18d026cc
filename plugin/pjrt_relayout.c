/* Dense layouts and argument relayout (pjrt_relayout.h). */
#include "plugin/pjrt_relayout.h"

#include <string.h>

#include "base/alloc.h"
#include "plugin/pjrt_internal.h"

void kiln_pjrt_m2m_strides(int32_t rank, const int64_t *dims, const int64_t *m2m, size_t elem,
                           int64_t *strides) {
  int64_t s = (int64_t)elem;
  for (int32_t i = 0; i < rank; i++) {
    strides[m2m[i]] = s;
    s *= dims[m2m[i]] > 0 ? dims[m2m[i]] : 1;
  }
}

bool kiln_pjrt_m2m_same_placement(int32_t rank, const int64_t *dims, const int64_t *a,
                                  const int64_t *b) {
  if (rank > 64) return false;
  int64_t sa[64], sb[64];
  kiln_pjrt_m2m_strides(rank, dims, a, 1, sa);
  kiln_pjrt_m2m_strides(rank, dims, b, 1, sb);
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] == 0) return true; /* no elements */
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] > 1 && sa[i] != sb[i]) return false;
  return true;
}

void kiln_pjrt_copy_strided(char *dst, const int64_t *dst_strides, const char *src,
                            const int64_t *src_strides, const int64_t *dims, int32_t rank,
                            size_t elem) {
  for (int32_t i = 0; i < rank; i++)
    if (dims[i] == 0) return;
  if (rank == 0) {
    memcpy(dst, src, elem);
    return;
  }
  /* Innermost: the dimension with the smallest destination stride. */
  int32_t inner = 0;
  for (int32_t i = 1; i < rank; i++)
    if (dst_strides[i] < dst_strides[inner]) inner = i;
  int64_t n_inner = dims[inner];
  int64_t ds = dst_strides[inner], ss = src_strides[inner];
  bool contiguous = ds == (int64_t)elem && ss == (int64_t)elem;
  int64_t idx[64] = {0};
  for (;;) {
    int64_t doff = 0, soff = 0;
    for (int32_t i = 0; i < rank; i++) {
      doff += idx[i] * dst_strides[i];
      soff += idx[i] * src_strides[i];
    }
    if (contiguous) {
      memcpy(dst + doff, src + soff, (size_t)n_inner * elem);
    } else {
      for (int64_t k = 0; k < n_inner; k++) memcpy(dst + doff + k * ds, src + soff + k * ss, elem);
    }
    int32_t i = rank - 1;
    for (; i >= 0; i--) {
      if (i == inner) continue;
      if (++idx[i] < dims[i]) break;
      idx[i] = 0;
    }
    if (i < 0) return;
  }
}

kiln_status kiln_pjrt_relayout(PJRT_Device *dev, kiln_stream_t *stream, const PJRT_Buffer *b,
                               kiln_devptr_t src, const int64_t *dst_m2m,
                               kiln_device_buffer_t **out) {
  *out = NULL;
  int32_t rank = b->rank;
  if (rank > 64) return KILN_ERR_UNIMPLEMENTED("relayout of a rank-%d argument", rank);
  size_t elem = kiln_pjrt_type_bytes(b->type);
  uint64_t size = b->on_device_size;
  int64_t ss[64], ds[64];
  kiln_pjrt_m2m_strides(rank, b->dims, b->minor_to_major, elem, ss);
  kiln_pjrt_m2m_strides(rank, b->dims, dst_m2m, elem, ds);
  kiln_device_buffer_t *nb = NULL;
  KILN_RETURN_IF_ERROR(kiln_device_buffer_create(dev->kdev, size ? size : 1, &nb),
                       "for the relayout of an argument on %s", dev->desc.to_string);
  kiln_status s = NULL;
  if (!dev->client->is_cuda) {
    /* host memory on both sides */
    kiln_pjrt_copy_strided((char *)(uintptr_t)nb->ptr, ds, (const char *)(uintptr_t)src, ss,
                           b->dims, rank, elem);
  } else if (size) {
    /* through host memory: read, transpose, write */
    char *in = kiln_try_malloc(size), *tr = kiln_try_malloc(size);
    if (!in || !tr)
      s = kiln_status_make(KILN_RESOURCE_EXHAUSTED, "cannot stage %llu bytes for a relayout",
                           (unsigned long long)size);
    if (!s) s = kiln_stream_memcpy_d2h(stream, in, src, size);
    if (!s) s = kiln_stream_synchronize(stream);
    if (!s) {
      kiln_pjrt_copy_strided(tr, ds, in, ss, b->dims, rank, elem);
      s = kiln_stream_memcpy_h2d(stream, nb->ptr, tr, size);
    }
    if (!s) s = kiln_stream_synchronize(stream);
    kiln_free(in);
    kiln_free(tr);
  }
  if (s) {
    kiln_device_buffer_destroy(nb);
    return s;
  }
  *out = nb;
  return NULL;
}
