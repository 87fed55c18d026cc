/* Literal <-> physical layout copies (literal_layout.h). */
#include "compiler/hlo/literal_layout.h"

#include <string.h>

bool kiln_shape_is_row_major(const kiln_shape_t *s) {
  if (!s->has_layout || s->rank <= 1) return true;
  for (int i = 0; i < s->rank; i++)
    if (s->layout.minor_to_major[i] != s->rank - 1 - i) return false;
  return true;
}

/* Walks the logical row-major index space; for element i (logical) calls the copy with the
 * physical offset of the same element. */
static void relayout(const kiln_shape_t *shape, size_t eb, int64_t n, char *logical,
                     char *physical, bool to_physical) {
  int r = shape->rank;
  int64_t stride[64] = {0}; /* physical stride of each logical dim, in elements */
  int64_t acc = 1;
  for (int k = 0; k < r; k++) {
    int64_t d = shape->layout.minor_to_major[k];
    stride[d] = acc;
    acc *= shape->dims[d];
  }
  int64_t idx[64] = {0};
  int64_t off = 0;
  for (int64_t i = 0; i < n; i++) {
    char *lp = logical + (size_t)i * eb, *pp = physical + (size_t)off * eb;
    if (to_physical) memcpy(pp, lp, eb);
    else memcpy(lp, pp, eb);
    for (int d = r - 1; d >= 0; d--) {
      idx[d]++;
      off += stride[d];
      if (idx[d] < shape->dims[d]) break;
      off -= stride[d] * idx[d];
      idx[d] = 0;
    }
  }
}

void kiln_literal_write_physical(const kiln_literal_t *l, const kiln_shape_t *shape, void *dst) {
  size_t eb = kiln_elem_type_storage_bytes(l->shape->type);
  if (!l->data || l->num_elements == 0) return;
  if (kiln_shape_is_row_major(shape) || shape->rank > 64)
    memcpy(dst, l->data, (size_t)l->num_elements * eb);
  else
    relayout(shape, eb, l->num_elements, l->data, dst, true);
}

void kiln_literal_read_physical(kiln_literal_t *l, const kiln_shape_t *shape, const void *src) {
  size_t eb = kiln_elem_type_storage_bytes(l->shape->type);
  if (!l->data || l->num_elements == 0) return;
  if (kiln_shape_is_row_major(shape) || shape->rank > 64)
    memcpy(l->data, src, (size_t)l->num_elements * eb);
  else
    relayout(shape, eb, l->num_elements, l->data, (char *)src, false);
}
