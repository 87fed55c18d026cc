/* Custom-call thunks (custom_call_emitter.h). */
#include "compiler/thunks/custom_call_emitter.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/byte_io.h"
#include "base/vec.h"
#include "compiler/eval/eval.h"
#include "compiler/passes/dataflow.h"
#include "ffi/ffi_attrs.h"
#include "runtime/ffi_call.h"

XLA_FFI_DataType kiln_custom_call_ffi_dtype(kiln_elem_type_t t) {
  switch (t) {
    case KILN_PRED:
      return XLA_FFI_DataType_PRED;
    case KILN_S1:
      return XLA_FFI_DataType_S1;
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
    case KILN_U1:
      return XLA_FFI_DataType_U1;
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
    case KILN_F4E2M1FN:
      return XLA_FFI_DataType_F4E2M1FN;
    case KILN_TOKEN:
      return XLA_FFI_DataType_TOKEN;
    default:
      return XLA_FFI_DataType_INVALID;
  }
}

/* The default registry's one-time load of the default spec (the edges' $KILN_FFI_HANDLERS,
 * kiln_ffi_registry_set_default_spec). */
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static kiln_status g_env_status;
static void load_env(void) {
  g_env_status = kiln_ffi_registry_load_default_spec(kiln_ffi_registry_default());
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

/* The registry custom calls look handlers up in: opts->ffi_registry, else the default one
 * (loaded from $KILN_FFI_HANDLERS once). */
static kiln_status registry_of(const kiln_thunk_emit_options_t *opts, kiln_ffi_registry_t **out) {
  *out = opts->ffi_registry;
  if (*out) return NULL;
  kiln_once(&g_env_once, load_env);
  if (g_env_status)
    return kiln_status_make(kiln_status_code(g_env_status), "%s",
                            kiln_status_message(g_env_status));
  *out = kiln_ffi_registry_default();
  return NULL;
}

/* What an FFI custom-call thunk is made from, at compile time or when a serialized
 * executable is read (the handler is looked up then, by target and platform). */
typedef struct ffi_parts {
  const char *name, *target;
  kiln_ffi_platform_t platform;
  int64_t api_version; /* as written in the HLO (0: not written) */
  const char *cfg;     /* backend_config */
  bool tuple_result;
  const kiln_ffi_buffer_desc_t *args, *rets;
  size_t nargs, nrets;
  const kiln_slice_t *arg_slices, *ret_slices;
} ffi_parts_t;

/* The recipe of an FFI call (kiln_thunk_custom_call_set_recipe): everything in `p` but the
 * names and slices, which the serialized thunk holds. */
static void ffi_recipe(const ffi_parts_t *p, kiln_byte_writer_t *w) {
  kiln_bw_u8(w, KILN_RECIPE_FFI);
  kiln_bw_u8(w, (uint8_t)p->platform);
  kiln_bw_u64(w, (uint64_t)p->api_version);
  kiln_bw_str(w, p->cfg);
  kiln_bw_u8(w, p->tuple_result);
  const kiln_ffi_buffer_desc_t *lists[2] = {p->args, p->rets};
  size_t counts[2] = {p->nargs, p->nrets};
  for (int l = 0; l < 2; l++) {
    kiln_bw_u32(w, (uint32_t)counts[l]);
    for (size_t i = 0; i < counts[l]; i++) {
      kiln_bw_u32(w, (uint32_t)lists[l][i].dtype);
      kiln_bw_u32(w, (uint32_t)lists[l][i].rank);
      for (int64_t d = 0; d < lists[l][i].rank; d++) kiln_bw_u64(w, (uint64_t)lists[l][i].dims[d]);
    }
  }
}

static kiln_status make_ffi_thunk(const ffi_parts_t *p, kiln_ffi_registry_t *registry,
                                  kiln_executable_desc_t *d, kiln_thunk_t **out) {
  *out = NULL;
  kiln_ffi_handler_t h;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_ffi_registry_lookup(registry, p->target, p->platform, &h));
  /* api_version not written means API_VERSION_ORIGINAL (legacy) in XLA; kiln falls back to
   * the typed handler when the target has no legacy one. */
  int version = (int)p->api_version;
  if (version == 0) version = h.legacy || !h.bundle.execute ? 1 : 4;
  const char *cfg = p->cfg;
  kiln_ffi_attrs_t *attrs = NULL;
  /* In that fallback a backend_config that is not a dictionary is the legacy opaque string,
   * not attributes: the handler gets none. */
  const char *c = cfg;
  while (*c == ' ' || *c == '\t' || *c == '\n') c++;
  bool opaque_only = p->api_version == 0 && *c && *c != '{';
  if (version == 4 && !opaque_only) {
    kiln_status s = kiln_ffi_attrs_parse(cfg, strlen(cfg), &attrs);
    if (s)
      return kiln_status_annotate(s, "in the backend_config of custom call %s (target %s)", p->name,
                                  p->target);
  }
  kiln_ffi_call_desc_t cd = {0};
  cd.name = p->name;
  cd.handler = &h;
  cd.api_version = version;
  cd.attrs = attrs;
  cd.opaque = cfg;
  cd.opaque_len = strlen(cfg);
  cd.args = p->args;
  cd.nargs = p->nargs;
  cd.rets = p->rets;
  cd.nrets = p->nrets;
  cd.tuple_result = p->tuple_result;
  kiln_ffi_call_t *call = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_ffi_call_create(&cd, &call));
  kiln_executable_desc_own_with(d, call, kiln_ffi_call_destroy);
  *out =
      kiln_ffi_call_thunk_create(call, p->arg_slices, (int)p->nargs, p->ret_slices, (int)p->nrets);
  kiln_byte_writer_t w = {0};
  ffi_recipe(p, &w);
  kiln_thunk_custom_call_set_recipe(*out, w.b.data, w.b.len);
  kiln_strbuf_free(&w.b);
  return NULL;
}

kiln_status kiln_custom_call_emit(const kiln_hlo_instruction_t *in,
                                  const kiln_buffer_assignment_t *ba,
                                  const kiln_thunk_emit_options_t *opts, kiln_executable_desc_t *d,
                                  kiln_thunk_seq_t *seq) {
  const char *tgt = in->custom_call_target ? in->custom_call_target : "";
  kiln_compile_target_t target = opts->target;
  kiln_ffi_platform_t platform =
      target == KILN_TARGET_CUDA ? KILN_FFI_PLATFORM_CUDA : KILN_FFI_PLATFORM_HOST;
  kiln_ffi_registry_t *registry = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(registry_of(opts, &registry));
  kiln_ffi_handler_t h;
  kiln_status s = kiln_ffi_registry_lookup(registry, tgt, platform, &h);
  if (s) {
    kiln_status_free(s);
    if (target == KILN_TARGET_HOST && kiln_builtin_custom_call_known(tgt))
      return kiln_builtin_custom_call_emit(in, ba, opts->rng_seed, d, seq);
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_identity_target_reshapes(in));
    KILN_RETURN_IF_ERROR_PLAIN(kiln_eval_solver_refusal(in));
    return kiln_status_make(KILN_NOT_FOUND,
                            "custom call %s: no handler for target %s on platform %s (register "
                            "one with KILN_FFI_HANDLERS=... or kiln-run --ffi=...)",
                            in->name, tgt, kiln_ffi_platform_name(platform));
  }
  desc_vec_t args = {0}, rets = {0};
  slice_vec_t arg_slices = {0}, ret_slices = {0};
  for (int i = 0; !s && i < in->num_operands; i++)
    s = add_leaves(in, in->operands[i], ba, &args, &arg_slices);
  if (!s) s = add_leaves(in, in, ba, &rets, &ret_slices);
  if (!s) {
    ffi_parts_t p = {0};
    p.name = in->name;
    p.target = tgt;
    p.platform = platform;
    p.api_version = in->api_version;
    p.cfg = in->backend_config ? in->backend_config : "";
    p.tuple_result = kiln_shape_is_tuple(in->shape);
    p.args = args.data;
    p.nargs = args.len;
    p.rets = rets.data;
    p.nrets = rets.len;
    p.arg_slices = arg_slices.data;
    p.ret_slices = ret_slices.data;
    kiln_thunk_t *t = NULL;
    s = make_ffi_thunk(&p, registry, d, &t);
    if (!s) kiln_thunk_seq_push(seq, t);
  }
  kiln_vec_free(&args);
  kiln_vec_free(&rets);
  kiln_vec_free(&arg_slices);
  kiln_vec_free(&ret_slices);
  return s;
}

void kiln_recipe_open(const kiln_recipe_call_t *c, int kind, kiln_byte_reader_t *r) {
  kiln_br_init(r, c->recipe, c->len);
  if (kiln_br_u8(r, "recipe kind") != kind && !r->err)
    kiln_br_fail(r, KILN_ERR_INVALID("custom call %s: not a recipe of kind %d", c->name, kind));
}

/* Reads the buffer descriptions of an FFI recipe (dims kiln_malloc'ed in one block). */
static void read_descs(kiln_byte_reader_t *r, size_t n, kiln_ffi_buffer_desc_t *out,
                       int64_t **dims) {
  for (size_t i = 0; i < n && !r->err; i++) {
    out[i].dtype = (XLA_FFI_DataType)kiln_br_u32(r, "ffi buffer type");
    uint32_t rank = kiln_br_count(r, 8, "ffi buffer rank");
    dims[i] = kiln_calloc((size_t)rank + 1, sizeof(int64_t));
    for (uint32_t k = 0; k < rank; k++) dims[i][k] = (int64_t)kiln_br_u64(r, "ffi buffer dim");
    out[i].rank = rank;
    out[i].dims = dims[i];
  }
}

kiln_status kiln_ffi_custom_call_rebuild(const kiln_thunk_emit_options_t *opts,
                                         const kiln_recipe_call_t *c, kiln_thunk_t **out) {
  *out = NULL;
  kiln_byte_reader_t r;
  kiln_recipe_open(c, KILN_RECIPE_FFI, &r);
  ffi_parts_t p = {0};
  p.name = c->name;
  p.target = c->target;
  uint8_t platform = kiln_br_u8(&r, "ffi platform");
  p.platform = platform == KILN_FFI_PLATFORM_CUDA ? KILN_FFI_PLATFORM_CUDA : KILN_FFI_PLATFORM_HOST;
  p.api_version = (int64_t)kiln_br_u64(&r, "ffi api version");
  char *cfg = kiln_br_str(&r, "backend_config");
  p.cfg = cfg;
  p.tuple_result = kiln_br_u8(&r, "tuple result") != 0;
  uint32_t na = kiln_br_count(&r, 8, "ffi arguments");
  kiln_ffi_buffer_desc_t *args = kiln_calloc((size_t)na + 1, sizeof(*args));
  int64_t **adims = kiln_calloc((size_t)na + 1, sizeof(*adims));
  read_descs(&r, na, args, adims);
  uint32_t nr = kiln_br_count(&r, 8, "ffi results");
  kiln_ffi_buffer_desc_t *rets = kiln_calloc((size_t)nr + 1, sizeof(*rets));
  int64_t **rdims = kiln_calloc((size_t)nr + 1, sizeof(*rdims));
  read_descs(&r, nr, rets, rdims);
  kiln_status s = r.err;
  if (!s && (r.left || na != (uint32_t)c->num_operands || nr != (uint32_t)c->num_results ||
             platform > KILN_FFI_PLATFORM_CUDA))
    s = KILN_ERR_INVALID("FFI recipe of %s: %u arguments and %u results for %d and %d slices",
                         c->name, na, nr, c->num_operands, c->num_results);
  kiln_ffi_registry_t *registry = NULL;
  if (!s) s = registry_of(opts, &registry);
  if (!s) {
    p.args = args;
    p.nargs = na;
    p.rets = rets;
    p.nrets = nr;
    p.arg_slices = c->operands;
    p.ret_slices = c->results;
    s = make_ffi_thunk(&p, registry, c->d, out);
  }
  for (uint32_t i = 0; i < na; i++) kiln_free(adims[i]);
  for (uint32_t i = 0; i < nr; i++) kiln_free(rdims[i]);
  kiln_free(adims);
  kiln_free(rdims);
  kiln_free(args);
  kiln_free(rets);
  kiln_free(cfg);
  return s;
}
