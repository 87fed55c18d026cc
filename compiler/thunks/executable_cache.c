/* Whole compiled executables as bytes, and the compile driver's cache key
 * (executable_cache.h). */
#include "compiler/thunks/executable_cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/hash.h"
#include "base/str.h"
#include "compiler/backend/host_jit.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/thunks/custom_call_emitter.h"
#include "runtime/executable_serialize.h"

kiln_status kiln_executable_desc_to_bytes(const kiln_executable_desc_t *d, void **out,
                                          size_t *len) {
  return kiln_executable_desc_serialize(d, out, len);
}

typedef struct resolver {
  const kiln_thunk_emit_options_t *opts;
  void *rng; /* the description's generator state, made by its first rng thunk */
} resolver_t;

static kiln_status resolve(void *user, kiln_executable_desc_t *d, const char *name,
                           const char *target, const void *recipe, size_t len,
                           const kiln_slice_t *operands, int num_operands,
                           const kiln_slice_t *results, int num_results, kiln_thunk_t **out) {
  resolver_t *r = user;
  kiln_recipe_call_t c = {d,        name,    target,       recipe,     len,
                          operands, results, num_operands, num_results};
  uint8_t kind = len ? *(const uint8_t *)recipe : 0;
  switch (kind) {
    case KILN_RECIPE_FFI:
      return kiln_ffi_custom_call_rebuild(r->opts, &c, out);
    case KILN_RECIPE_BUILTIN:
      return kiln_builtin_custom_call_rebuild(&c, out);
    case KILN_RECIPE_RNG_STATE:
      return kiln_rng_state_rebuild(&c, &r->rng, out);
    default:
      return KILN_ERR_INVALID("custom call %s: unknown recipe kind %u", name, kind);
  }
}

/* Links the host images' objects together (kiln_host_link_objects: kiln's ELF loader, else a
 * new JIT) and fills their function pointers. */
static kiln_status link_host_images(kiln_executable_desc_t *d, bool orc_only) {
  int total = 0;
  for (int32_t i = 0; d->image_objects && i < d->num_images; i++)
    total += d->image_objects[i].num_objects;
  if (!total) return NULL;
  const void **data = kiln_calloc((size_t)total, sizeof(void *));
  size_t *sizes = kiln_calloc((size_t)total, sizeof(size_t));
  const char **symbols = kiln_calloc((size_t)total, sizeof(char *));
  void **addr = kiln_calloc((size_t)total, sizeof(void *));
  int k = 0;
  for (int32_t i = 0; i < d->num_images; i++) {
    const kiln_exec_image_objects_t *o = &d->image_objects[i];
    for (int32_t j = 0; j < o->num_objects; j++, k++) {
      data[k] = o->data[j];
      sizes[k] = o->sizes[j];
      symbols[k] = o->symbols[j];
    }
  }
  kiln_host_linked_t linked;
  kiln_status s = kiln_host_link_objects(data, sizes, symbols, total, orc_only, addr, &linked);
  if (!s) {
    d->keepalive = linked.owner;
    d->keepalive_free = linked.owner_free;
    k = 0;
    for (int32_t i = 0; i < d->num_images; i++) {
      const kiln_exec_image_objects_t *o = &d->image_objects[i];
      kiln_module_image_t *im = &d->images[i];
      for (size_t f = 0; o->num_objects && f < im->num_functions; f++)
        ((void **)im->functions)[f] = addr[k + o->function_object[f]];
      k += o->num_objects;
    }
  }
  kiln_free(data);
  kiln_free(sizes);
  kiln_free(symbols);
  kiln_free(addr);
  return s ? kiln_status_annotate(s, "linking the host images of a serialized executable") : NULL;
}

kiln_status kiln_executable_desc_from_bytes_unlinked(const void *data, size_t len,
                                                     const kiln_thunk_emit_options_t *opts,
                                                     kiln_executable_desc_t **out) {
  if (out) *out = NULL;
  if (!out) return KILN_ERR_INVALID("executable from bytes: NULL out");
  static const kiln_thunk_emit_options_t kDefaults = {0};
  resolver_t r = {opts ? opts : &kDefaults, NULL};
  return kiln_executable_desc_deserialize(data, len, resolve, &r, out);
}

kiln_status kiln_executable_desc_from_bytes(const void *data, size_t len,
                                            const kiln_thunk_emit_options_t *opts,
                                            kiln_executable_desc_t **out) {
  kiln_executable_desc_t *d = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_executable_desc_from_bytes_unlinked(data, len, opts, &d));
  kiln_status s = link_host_images(d, opts && opts->host_jit.orc_link);
  if (s) {
    kiln_executable_desc_destroy(d);
    return s;
  }
  *out = d;
  return NULL;
}

static void hash_str(kiln_hasher_t *h, const char *s) {
  kiln_hash_field(h, s ? s : "\x01(null)", s ? strlen(s) : 7);
}

kiln_status kiln_executable_cache_key(const kiln_hlo_module_t *m, const kiln_compile_options_t *o,
                                      bool optimized, uint64_t key[2]) {
  if (!m || !o) return KILN_ERR_INVALID("executable cache key: NULL argument");
  kiln_hasher_t h;
  kiln_kernel_cache_key_begin(&h); /* LLVM's and kiln's versions */
  hash_str(&h, optimized ? "kiln-executable-optimized" : "kiln-executable");
  kiln_hash_word(&h, KILN_EXEC_FORMAT_VERSION);
  kiln_strbuf_t text = {0};
  kiln_hlo_module_print(&text, m);
  kiln_hash_field(&h, text.data ? text.data : "", text.len);
  kiln_strbuf_free(&text);
  const kiln_thunk_emit_options_t *e = &o->emit;
  kiln_hash_word(&h, (uint64_t)e->target);
  hash_str(&h, e->target == KILN_TARGET_CUDA ? (e->arch ? e->arch : "sm_90") : "");
  kiln_hash_word(&h, e->target == KILN_TARGET_CUDA && e->cublaslt); /* bf16 gemms, epilogues */
  /* The world collectives are emitted for (0: the module's own; the plugin gives it). */
  kiln_hash_word(&h, (uint64_t)e->num_replicas);
  kiln_hash_word(&h, (uint64_t)e->num_partitions);
  kiln_hash_word(&h, (uint64_t)e->max_while_iterations);
  kiln_hash_word(&h, e->rng_seed);
  kiln_hash_word(&h, e->strict_precision);
  kiln_hash_word(&h, e->deterministic);
  kiln_hash_word(&h, e->synchronous_collectives);
  kiln_hash_word(&h, o->command_buffer_min_run);
  kiln_hash_word(&h, o->no_command_buffers);
  /* Every option that changes lowering, from the options alone (the edges read the
   * environment into them: KILN_DISABLE_PASSES, KILN_GEMM_LIBRARY, KILN_ALLOW_EXCESS_PRECISION
   * and XLA_FLAGS as strict_precision above, KILN_CUDA_DIR, CUDA_HOME, CUDA_PATH). */
  kiln_pass_options_t po = {.verify = -1};
  if (o->passes) po = *o->passes;
  hash_str(&h, po.disabled_passes);
  kiln_hash_word(&h, (uint64_t)po.max_fixed_point_iterations);
  kiln_hash_word(&h, po.no_gemm_library);
  kiln_hash_word(&h, po.gemm_f32_f64_only);
  kiln_hash_word(&h, (uint64_t)po.all_reduce_combine_threshold_bytes);
  kiln_hash_word(&h, (uint64_t)po.all_gather_combine_threshold_bytes);
  kiln_hash_word(&h, (uint64_t)po.reduce_scatter_combine_threshold_bytes);
  if (e->target == KILN_TARGET_CUDA) { /* the toolkit: libdevice, nvJitLink, ptxas */
    hash_str(&h, e->cuda.dir);
    hash_str(&h, e->cuda.home);
    hash_str(&h, e->cuda.path);
  }
  if (e->target == KILN_TARGET_HOST) {
    kiln_strbuf_t t = {0};
    kiln_host_jit_target_id(&e->host_jit, &t); /* triple, CPU, features, pipeline */
    kiln_hash_field(&h, t.data ? t.data : "", t.len);
    kiln_strbuf_free(&t);
  }
  kiln_hash_final(&h, key);
  return NULL;
}
