/* The kernel-IR pipeline driver, dumps, and compilation for both targets (kir_pipeline.h). */
#include "compiler/codegen/kir_pipeline.h"

#include <stdio.h>
#include <string.h>

#include "compiler/backend/llvm_init.h"

static kiln_status dump_stage(const kiln_kir_module_t *m, const char *dir, const char *name,
                              const char *stage) {
  if (!dir) return NULL;
  char *text = kiln_kir_to_string(m);
  kiln_status s = kiln_backend_dump_text(dir, name, stage, "txt", text, strlen(text));
  kiln_free(text);
  return s;
}

kiln_status kiln_kir_pipeline_run(kiln_kir_module_t *m, const kiln_kir_pipeline_options_t *opts) {
  if (!m) return KILN_ERR_INVALID("kir pipeline: NULL module");
  kiln_kir_pipeline_options_t o = {0};
  if (opts) o = *opts;
  const char *dir = kiln_backend_dump_dir(o.dump_dir);
  const char *name = o.dump_name ? o.dump_name : m->name;
  int max_trip = o.unroll_max_trip == 0 ? 8 : o.unroll_max_trip;
  KILN_RETURN_IF_ERROR(kiln_kir_verify(m), "kir pipeline input of %s", name);
  KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "50-kir-input"), "dumping");
  KILN_RETURN_IF_ERROR(kiln_kir_inline(m), "kir pipeline of %s", name);
  KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "51-kir-inline"), "dumping");
  KILN_RETURN_IF_ERROR(kiln_kir_lower_loops(m), "kir pipeline of %s", name);
  KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "52-kir-lower-loops"), "dumping");
  KILN_RETURN_IF_ERROR(kiln_kir_flatten(m), "kir pipeline of %s", name);
  KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "53-kir-flatten"), "dumping");
  if (!o.no_vectorize) {
    KILN_RETURN_IF_ERROR(kiln_kir_vectorize(m), "kir pipeline of %s", name);
    KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "54-kir-vectorize"), "dumping");
  }
  if (max_trip > 0) {
    KILN_RETURN_IF_ERROR(kiln_kir_unroll(m, max_trip), "kir pipeline of %s", name);
    KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "55-kir-unroll"), "dumping");
  }
  KILN_RETURN_IF_ERROR(kiln_kir_hoist(m), "kir pipeline of %s", name);
  KILN_RETURN_IF_ERROR(dump_stage(m, dir, name, "56-kir-hoist"), "dumping");
  return NULL;
}

kiln_status kiln_kir_host_kernel_run(const kiln_kir_host_kernel_t *k, kiln_host_pool_t *pool,
                                     void **args) {
  if (!k || !k->fn) return KILN_ERR_INVALID("kir host run: kernel not compiled");
  if (k->num_params && !args) return KILN_ERR_INVALID("kir host run: NULL args");
  for (size_t i = 0; i < k->num_params; i++)
    if (!args[i]) return KILN_ERR_INVALID("kir host run: argument %zu is NULL", i);
  return kiln_host_pool_launch(pool, k->fn, args, k->num_blocks, 0);
}
