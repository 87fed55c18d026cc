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
  return NULL;
}

kiln_status kiln_kir_compile_host(const kiln_kir_module_t *m, kiln_host_jit_t *jit,
                                  kiln_kir_host_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!m || !jit) return KILN_ERR_INVALID("kir compile host: NULL module or JIT");
  const kiln_kir_func_t *k = kiln_kir_module_kernel(m);
  if (!k) return KILN_ERR_INVALID("kir compile host: module %s has no kernel", m->name);
  if (strlen(k->name) >= sizeof(out->name))
    return KILN_ERR_INVALID("kir compile host: kernel name too long");
  LLVMModuleRef mod = NULL;
  KILN_RETURN_IF_ERROR(kiln_kir_lower_host(m, kiln_host_jit_context(jit), &mod),
                       "compiling %s for the host", m->name);
  KILN_RETURN_IF_ERROR(kiln_host_jit_add_module(jit, mod, m->name), "compiling %s for the host",
                       m->name);
  void *addr = NULL;
  KILN_RETURN_IF_ERROR(kiln_host_jit_lookup(jit, k->name, &addr), "compiling %s for the host",
                       m->name);
  out->fn = (kiln_host_kernel_fn)addr;
  out->num_blocks = k->grid[0] * k->grid[1] * k->grid[2];
  out->num_params = kiln_kir_func_num_params(k);
  strcpy(out->name, k->name);
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
