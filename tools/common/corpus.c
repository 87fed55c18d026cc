#include "tools/common/corpus.h"

#include <stdlib.h>
#include <string.h>

#include "base/str.h"

static const kiln_corpus_invalid_t kKnownInvalid[] = {
    {"xla__tools__tests__data__invalid_concat.hlo", 0, "concatenate",
     "invalid on purpose: concatenate operands differ outside the concatenated dimension"},
    {"xla__hlo__builder__tests__math_next_after.hlo", 1, "entry_computation_layout",
     "the entry layout says f32[], the parameters are f8e5m2fnuz[]"},
    {"xla__hlo__translate__hlo_to_mhlo__tests__layouts_and_names.hlo", 1,
     "entry_computation_layout", "the entry layout says f32[524,524,524], the parameter is f16"},
    {"xla__hlo__transforms__tests__operand_upcaster.hlo", 0, "dot",
     "dot(s8[8], s16[8]) without contracting dims is an outer product s32[8,8], not s32[8]"},
    {"xla__hlo__transforms__tests__rewrite_bf16_conv_to_onednn.hlo", 1, "convolution",
     "padding -1_-1 gives bf16[8,0,5,5,32], the module declares [4,4,5,5,32]"},
    {"xla__hlo__tools__tests__generate_hlo_test_checks_test_input.hlo", 4, "call",
     "a call passes f32[4] to a computation taking f32[] (input of a text tool's test)"},
    {"xla__hlo__tools__tests__generate_hlo_test_checks_test_output.hlo", 4, "call",
     "a call passes f32[4] to a computation taking f32[] (output of a text tool's test)"},
    {"xla__hlo__translate__hlo_to_mhlo__tests__import.hlo", 0, "window size",
     "a convolution window of 3x3 over a 2x2 kernel"},
    {"xla__hlo__translate__hlo_to_mhlo__tests__while.hlo", 0, "broadcast",
     "broadcast f32[1] -> f32[3]: XLA requires equal sizes, no size-1 stretching"},
};

const kiln_corpus_invalid_t *kiln_corpus_invalid_list(size_t *out_n) {
  *out_n = sizeof kKnownInvalid / sizeof kKnownInvalid[0];
  return kKnownInvalid;
}

const kiln_corpus_invalid_t *kiln_corpus_find_invalid(const char *path, int module) {
  for (size_t i = 0; i < sizeof kKnownInvalid / sizeof kKnownInvalid[0]; i++)
    if (kiln_str_ends_with(path, kKnownInvalid[i].file_suffix) && kKnownInvalid[i].module == module)
      return &kKnownInvalid[i];
  return NULL;
}

bool kiln_corpus_sampled(const char *name) {
  const char *env = getenv("KILN_CORPUS_SAMPLE");
  long n = env ? strtol(env, NULL, 10) : 0;
  if (n <= 1) return true;
  /* Hash only the file's base name so the choice does not depend on where the corpus is. */
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  return kiln_hash_bytes(base, strlen(base)) % (unsigned long)n == 0;
}
