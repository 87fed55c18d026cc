/* Custom-call thunks (custom_call_emitter.h). */
#include "compiler/thunks/custom_call_emitter.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/vec.h"
#include "compiler/passes/dataflow.h"
#include "ffi/ffi_attrs.h"
#include "runtime/ffi_call.h"

XLA_FFI_DataType kiln_custom_call_ffi_dtype(kiln_elem_type_t t) {
  switch (t) {
    case KILN_PRED:
      return XLA_FFI_DataType_PRED;
    case KILN_S2:
      return XLA_FFI_DataType_S2;
    case KILN_S4:
      return XLA_FFI_DataType_S4;
    case KILN_S8:
      return XLA_FFI_DataType_S8;
    case KILN_S16:
      return XLA_FFI_DataType_S16;
    case KILN_S32:
      return XLA_FFI_DataType_S32;
    case KILN_S64:
      return XLA_FFI_DataType_S64;
    case KILN_U2:
      return XLA_FFI_DataType_U2;
    case KILN_U4:
      return XLA_FFI_DataType_U4;
    case KILN_U8:
      return XLA_FFI_DataType_U8;
    case KILN_U16:
      return XLA_FFI_DataType_U16;
    case KILN_U32:
      return XLA_FFI_DataType_U32;
    case KILN_U64:
      return XLA_FFI_DataType_U64;
    case KILN_F16:
      return XLA_FFI_DataType_F16;
    case KILN_BF16:
      return XLA_FFI_DataType_BF16;
    case KILN_F32:
      return XLA_FFI_DataType_F32;
    case KILN_F64:
      return XLA_FFI_DataType_F64;
    case KILN_C64:
      return XLA_FFI_DataType_C64;
    case KILN_C128:
      return XLA_FFI_DataType_C128;
    case KILN_F8E5M2:
      return XLA_FFI_DataType_F8E5M2;
    case KILN_F8E4M3:
      return XLA_FFI_DataType_F8E4M3;
    case KILN_F8E4M3FN:
      return XLA_FFI_DataType_F8E4M3FN;
    case KILN_F8E4M3B11FNUZ:
      return XLA_FFI_DataType_F8E4M3B11FNUZ;
    case KILN_F8E5M2FNUZ:
      return XLA_FFI_DataType_F8E5M2FNUZ;
    case KILN_F8E4M3FNUZ:
      return XLA_FFI_DataType_F8E4M3FNUZ;
    case KILN_F8E3M4:
      return XLA_FFI_DataType_F8E3M4;
    case KILN_F8E8M0FNU:
      return XLA_FFI_DataType_F8E8M0FNU;
    case KILN_TOKEN:
      return XLA_FFI_DataType_TOKEN;
    default:
      return XLA_FFI_DataType_INVALID;
  }
}

/* The default registry's one-time load of $KILN_FFI_HANDLERS. */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static kiln_status g_env_status;
static void load_env(void) {
  g_env_status = kiln_ffi_registry_load_env(kiln_ffi_registry_default(), "KILN_FFI_HANDLERS");
}

typedef KILN_VEC(kiln_ffi_buffer_desc_t) desc_vec_t;
typedef KILN_VEC(kiln_slice_t) slice_vec_t;

/* Appends the array leaves of `v`'s shape (depth first) with their slices. A buffer is in
 * the physical layout the value has (as XLA passes it): layout assignment gives custom-call
 * operands the default layout, a result keeps the layout the HLO wrote. */
static kiln_status add_leaves(const kiln_hlo_instruction_t *call, const kiln_hlo_instruction_t *v,
                              const kiln_buffer_assignment_t *ba, desc_vec_t *descs,
                              slice_vec_t *slices) {
  int n = kiln_shape_num_leaves(v->shape);
  for (int l = 0; l < n; l++) {
    const kiln_shape_t *s = kiln_shape_leaf(v->shape, l, NULL);
    if (!s || !kiln_shape_is_array(s)) continue; /* tokens carry no data */
    kiln_buffer_slice_t bs;
    if (!kiln_buffer_assignment_slice_at(ba, v, l, &bs) || bs.allocation < 0)
      return KILN_ERR_INTERNAL("custom call %s: leaf %d of %s has no buffer slice", call->name, l,
                               v->name);
    kiln_ffi_buffer_desc_t d = {kiln_custom_call_ffi_dtype(s->type), s->rank, s->dims, NULL};
    kiln_vec_push(descs, d);
    kiln_vec_push(slices, kiln_slice_make(bs.allocation, bs.offset, bs.size));
  }
  return NULL;
}

kiln_status kiln_custom_call_emit(const kiln_hlo_instruction_t *in,
                                  const kiln_buffer_assignment_t *ba,
                                  const kiln_thunk_emit_options_t *opts, kiln_executable_desc_t *d,
                                  kiln_thunk_seq_t *seq) {
  const char *tgt = in->custom_call_target ? in->custom_call_target : "";
  kiln_compile_target_t target = opts->target;
  kiln_ffi_registry_t *registry = opts->ffi_registry;
  kiln_ffi_platform_t platform =
      target == KILN_TARGET_CUDA ? KILN_FFI_PLATFORM_CUDA : KILN_FFI_PLATFORM_HOST;
  if (!registry) {
    pthread_once(&g_env_once, load_env);
    if (g_env_status)
      return kiln_status_make(kiln_status_code(g_env_status), "%s",
                              kiln_status_message(g_env_status));
    registry = kiln_ffi_registry_default();
  }
  kiln_ffi_handler_t h;
  kiln_status s = kiln_ffi_registry_lookup(registry, tgt, platform, &h);
  if (s) {
    kiln_status_free(s);
    if (target == KILN_TARGET_HOST && kiln_builtin_custom_call_known(tgt))
      return kiln_builtin_custom_call_emit(in, ba, opts->rng_seed, d, seq);
    return kiln_status_make(KILN_NOT_FOUND,
                            "custom call %s: no handler for target %s on platform %s (register "
                            "one with KILN_FFI_HANDLERS=... or kiln-run --ffi=...)",
                            in->name, tgt, kiln_ffi_platform_name(platform));
  }
  /* api_version not written means API_VERSION_ORIGINAL (legacy) in XLA; kiln falls back to
   * the typed handler when the target has no legacy one. */
  int version = (int)in->api_version;
  if (version == 0) version = h.legacy || !h.bundle.execute ? 1 : 4;
  const char *cfg = in->backend_config ? in->backend_config : "";
  kiln_ffi_attrs_t *attrs = NULL;
  /* In that fallback a backend_config that is not a dictionary is the legacy opaque string,
   * not attributes: the handler gets none. */
  const char *p = cfg;
  while (*p == ' ' || *p == '\t' || *p == '\n') p++;
  bool opaque_only = in->api_version == 0 && *p && *p != '{';
  if (version == 4 && !opaque_only) {
    s = kiln_ffi_attrs_parse(cfg, strlen(cfg), &attrs);
    if (s)
      return kiln_status_annotate(s, "in the backend_config of custom call %s (target %s)",
                                  in->name, tgt);
  }
  desc_vec_t args = {0}, rets = {0};
  slice_vec_t arg_slices = {0}, ret_slices = {0};
  for (int i = 0; !s && i < in->num_operands; i++)
    s = add_leaves(in, in->operands[i], ba, &args, &arg_slices);
  if (!s) s = add_leaves(in, in, ba, &rets, &ret_slices);
  kiln_ffi_call_t *call = NULL;
  if (!s) {
    kiln_ffi_call_desc_t cd = {0};
    cd.name = in->name;
    cd.handler = &h;
    cd.api_version = version;
    cd.attrs = attrs;
    attrs = NULL;
    cd.opaque = cfg;
    cd.opaque_len = strlen(cfg);
    cd.args = args.data;
    cd.nargs = args.len;
    cd.rets = rets.data;
    cd.nrets = rets.len;
    cd.tuple_result = kiln_shape_is_tuple(in->shape);
    s = kiln_ffi_call_create(&cd, &call);
  }
  kiln_ffi_attrs_destroy(attrs);
  if (!s) {
    kiln_executable_desc_own_with(d, call, kiln_ffi_call_destroy);
    kiln_thunk_seq_push(seq, kiln_ffi_call_thunk_create(call, arg_slices.data, (int)arg_slices.len,
                                                        ret_slices.data, (int)ret_slices.len));
  }
  kiln_vec_free(&args);
  kiln_vec_free(&rets);
  kiln_vec_free(&arg_slices);
  kiln_vec_free(&ret_slices);
  return s;
}
