/* XLA's "reduction beats elemental" rule (see reduction_rule.h). */
#include "compiler/analysis/reduction_rule.h"

bool kiln_reduction_faster_than_elemental(bool is_row, const int64_t dims[3]) {
  const int64_t warp = 32;
  if (is_row) return dims[2] >= warp || (dims[2] > 0 && warp % dims[2] == 0);
  int64_t major = dims[1], minor = dims[2];
  bool elemental = major < warp || (major < 2 * warp && minor < warp) ||
                   (major < 4 * warp && minor < 8) || (major < 8 * warp && minor < 3);
  return !elemental;
}
