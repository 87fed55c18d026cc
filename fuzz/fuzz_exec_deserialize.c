/* libFuzzer target for the serialized-executable reader (runtime/executable_serialize.h with
 * the compiler's custom-call recipes, compiler/thunks/executable_cache.h), which reads the
 * whole-executable cache (the compile driver's, and the plugin's per-device lowering when its
 * disk cache is on): any input must be read or refused, never crash, leak or hang. The
 * plugin's own serialized executables (PJRT_Executable_Serialize: options and optimized HLO
 * text, plugin/pjrt_blob.h) are another format, fuzzed by fuzz_pjrt_deserialize.
 * Seeds are real serialized executables (gen_executable_seeds: corpus modules compiled for the
 * host). The first byte picks the mode:
 *   even: the rest is the serialized bytes with the payload checksum recomputed first, so the
 *         mutations reach the structure checks behind it (a hostile writer could do the same);
 *   odd:  the rest as is (the header checks and the checksum).
 * A description that is read is checked as a loader would (prepare: every slice against the
 * allocations), then serialized again, and that must read back. Host images are not linked:
 * the object files are LLVM's input, not the format's. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "compiler/thunks/executable_cache.h"
#include "runtime/executable_serialize.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  size_t len = size - 1;
  unsigned char *b = malloc(len ? len : 1);
  if (len) memcpy(b, data + 1, len);
  if (data[0] % 2 == 0) kiln_executable_blob_reseal(b, len);
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_executable_desc_from_bytes_unlinked(b, len, NULL, &d);
  if (!s) {
    uint64_t *sizes = calloc((size_t)d->num_allocations + 1, sizeof(uint64_t));
    for (int32_t i = 0; i < d->num_allocations; i++) sizes[i] = d->allocations[i].size;
    kiln_thunk_prepare_params_t pp = {d->num_allocations, sizes};
    kiln_status_free(kiln_thunk_seq_prepare(&d->thunks, &pp));
    free(sizes);
    void *again = NULL;
    size_t again_len = 0;
    s = kiln_executable_desc_to_bytes(d, &again, &again_len);
    if (!s) {
      kiln_executable_desc_t *d2 = NULL;
      kiln_status s2 = kiln_executable_desc_from_bytes_unlinked(again, again_len, NULL, &d2);
      if (s2) abort(); /* what kiln wrote, kiln must read */
      kiln_executable_desc_destroy(d2);
    }
    kiln_free(again);
    kiln_executable_desc_destroy(d);
  }
  kiln_status_free(s);
  free(b);
  return 0;
}
