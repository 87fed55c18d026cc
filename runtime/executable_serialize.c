/* Serialized executables (executable_serialize.h). */
#include "runtime/executable_serialize.h"

#include <string.h>

#include "base/alloc.h"
#include "base/byte_io.h"
#include "base/hash.h"
#include "base/str.h"
#include "base/version.h"
#include "runtime/collective_thunk.h"
#include "runtime/command_buffer_thunk.h"
#include "runtime/thunk_internal.h"

static const char kMagic[8] = {'K', 'I', 'L', 'N', 'E', 'X', 'E', '\0'};
#define HASH_SEED 0x6b696c6e65786531ull
/* Image kinds. */
enum { IMAGE_BYTES = 0, IMAGE_HOST_OBJECTS = 1 };

/* ---- writing ----------------------------------------------------------------------------- */

typedef struct writer {
  kiln_byte_writer_t bw;
  kiln_status err; /* the first thing that cannot be written */
} writer_t;

static void put_slice(writer_t *w, kiln_slice_t s) {
  kiln_bw_u32(&w->bw, (uint32_t)s.allocation);
  kiln_bw_u64(&w->bw, (uint64_t)s.offset);
  kiln_bw_u64(&w->bw, (uint64_t)s.size);
}

static void put_seq(writer_t *w, const kiln_thunk_seq_t *s);

static void put_collective(writer_t *w, const kiln_thunk_t *t) {
  const kiln_coll_thunk_desc_t *c = kiln_thunk_collective_desc(t);
  if (!c) {
    if (!w->err) w->err = KILN_ERR_INTERNAL("collective %s has no description", t->name);
    return;
  }
  kiln_bw_u8(&w->bw, (uint8_t)c->op);
  kiln_bw_u8(&w->bw, (uint8_t)c->reduction);
  kiln_bw_u8(&w->bw, (uint8_t)c->phase);
  kiln_bw_u32(&w->bw, (uint32_t)c->num_replicas);
  kiln_bw_u32(&w->bw, (uint32_t)c->num_partitions);
  kiln_bw_u32(&w->bw, (uint32_t)c->num_buffers);
  for (int k = 0; k < c->num_buffers; k++) {
    const kiln_coll_thunk_buffer_t *b = &c->buffers[k];
    put_slice(w, b->send);
    put_slice(w, b->recv);
    kiln_bw_u8(&w->bw, (uint8_t)b->dtype);
    kiln_bw_u64(&w->bw, (uint64_t)b->count);
    kiln_bw_u64(&w->bw, (uint64_t)b->outer);
    kiln_bw_u64(&w->bw, (uint64_t)b->inner);
    kiln_bw_u64(&w->bw, (uint64_t)b->block_bytes);
  }
  int n = c->num_replicas * c->num_partitions;
  kiln_bw_u32(&w->bw, (uint32_t)n);
  for (int i = 0; i < n; i++) {
    kiln_bw_u64(&w->bw, (uint64_t)c->group_key[i]);
    kiln_bw_u32(&w->bw, (uint32_t)c->rank[i]);
    kiln_bw_u32(&w->bw, (uint32_t)c->group_size[i]);
    kiln_bw_u32(&w->bw, (uint32_t)c->source[i]);
  }
}

static void put_thunk(writer_t *w, const kiln_thunk_t *t) {
  kiln_bw_u8(&w->bw, (uint8_t)t->kind);
  kiln_bw_str(&w->bw, t->name);
  switch (t->kind) {
    case KILN_THUNK_KERNEL:
      kiln_bw_u32(&w->bw, (uint32_t)t->u.kernel.module_index);
      kiln_bw_str(&w->bw, t->u.kernel.kernel_name);
      for (int i = 0; i < 3; i++) kiln_bw_u32(&w->bw, t->u.kernel.dims.grid[i]);
      for (int i = 0; i < 3; i++) kiln_bw_u32(&w->bw, t->u.kernel.dims.block[i]);
      kiln_bw_u32(&w->bw, t->u.kernel.dims.shared_bytes);
      kiln_bw_u32(&w->bw, (uint32_t)t->u.kernel.num_args);
      for (int i = 0; i < t->u.kernel.num_args; i++) {
        const kiln_kernel_arg_t *a = &t->u.kernel.args[i];
        kiln_bw_u8(&w->bw, a->is_scalar);
        if (a->is_scalar)
          kiln_bw_u64(&w->bw, a->scalar);
        else
          put_slice(w, a->slice);
      }
      if (t->u.kernel.module_index < 0 && !w->err)
        w->err = KILN_ERR_UNIMPLEMENTED("kernel thunk %s has no module index", t->name);
      break;
    case KILN_THUNK_COPY:
      kiln_bw_u8(&w->bw, (uint8_t)t->u.copy.dir);
      put_slice(w, t->u.copy.src);
      put_slice(w, t->u.copy.dst);
      kiln_bw_u64(&w->bw, (uint64_t)t->u.copy.size);
      if (t->u.copy.host && !w->err)
        w->err = KILN_ERR_UNIMPLEMENTED("copy thunk %s holds a host pointer", t->name);
      break;
    case KILN_THUNK_MEMSET:
      put_slice(w, t->u.memset.dst);
      kiln_bw_u32(&w->bw, t->u.memset.pattern);
      kiln_bw_u32(&w->bw, (uint32_t)t->u.memset.elem_size);
      break;
    case KILN_THUNK_GEMM: {
      const kiln_gemm_desc_t *g = &t->u.gemm.desc;
      kiln_bw_u32(&w->bw, (uint32_t)g->dtype);
      kiln_bw_u32(&w->bw, (uint32_t)g->out_dtype);
      kiln_bw_u64(&w->bw, (uint64_t)g->batch);
      kiln_bw_u64(&w->bw, (uint64_t)g->m);
      kiln_bw_u64(&w->bw, (uint64_t)g->n);
      kiln_bw_u64(&w->bw, (uint64_t)g->k);
      kiln_bw_u8(&w->bw, g->trans_a);
      kiln_bw_u8(&w->bw, g->trans_b);
      kiln_bw_f64(&w->bw, g->alpha);
      kiln_bw_f64(&w->bw, g->beta);
      put_slice(w, t->u.gemm.a);
      put_slice(w, t->u.gemm.b);
      put_slice(w, t->u.gemm.c);
      kiln_bw_u8(&w->bw, (uint8_t)g->epilogue);
      kiln_bw_u8(&w->bw, t->u.gemm.has_bias);
      if (t->u.gemm.has_bias) put_slice(w, t->u.gemm.bias);
      break;
    }
    case KILN_THUNK_CUSTOM_CALL:
      kiln_bw_str(&w->bw, t->u.custom.target);
      kiln_bw_bytes(&w->bw, t->u.custom.recipe, t->u.custom.recipe_len);
      kiln_bw_u32(&w->bw, (uint32_t)t->u.custom.num_operands);
      for (int i = 0; i < t->u.custom.num_operands; i++) put_slice(w, t->u.custom.operands[i]);
      kiln_bw_u32(&w->bw, (uint32_t)t->u.custom.num_results);
      for (int i = 0; i < t->u.custom.num_results; i++) put_slice(w, t->u.custom.results[i]);
      if (!t->u.custom.recipe && !w->err)
        w->err = KILN_ERR_UNIMPLEMENTED("custom call %s (target %s) has no recipe to rebuild it",
                                        t->name, t->u.custom.target ? t->u.custom.target : "");
      break;
    case KILN_THUNK_WHILE:
      put_seq(w, &t->u.loop.cond);
      put_slice(w, t->u.loop.pred);
      put_seq(w, &t->u.loop.body);
      kiln_bw_u64(&w->bw, (uint64_t)t->u.loop.max_iterations);
      break;
    case KILN_THUNK_CONDITIONAL:
      put_slice(w, t->u.cond.index);
      kiln_bw_u8(&w->bw, t->u.cond.index_is_pred);
      kiln_bw_u32(&w->bw, (uint32_t)t->u.cond.num_branches);
      for (int i = 0; i < t->u.cond.num_branches; i++) put_seq(w, &t->u.cond.branches[i]);
      break;
    case KILN_THUNK_SEQUENTIAL:
      put_seq(w, &t->u.sequential.seq);
      break;
    case KILN_THUNK_COMMAND_BUFFER:
      put_seq(w, &t->u.cmdbuf.seq);
      break;
    case KILN_THUNK_COLLECTIVE:
      put_collective(w, t);
      break;
  }
}

static void put_seq(writer_t *w, const kiln_thunk_seq_t *s) {
  kiln_bw_u32(&w->bw, (uint32_t)s->len);
  for (size_t i = 0; i < s->len; i++) put_thunk(w, s->items[i]);
}

static void put_image(writer_t *w, const kiln_executable_desc_t *d, int32_t i) {
  const kiln_module_image_t *im = &d->images[i];
  const kiln_exec_image_objects_t *o = d->image_objects ? &d->image_objects[i] : NULL;
  if (im->num_functions == 0) {
    kiln_bw_u8(&w->bw, IMAGE_BYTES);
    kiln_bw_bytes(&w->bw, im->data, im->size);
    return;
  }
  kiln_bw_u8(&w->bw, IMAGE_HOST_OBJECTS);
  if (!o || o->num_objects == 0) {
    if (!w->err)
      w->err = KILN_ERR_UNIMPLEMENTED("image %d lists functions but keeps no object files", i);
    return;
  }
  kiln_bw_u32(&w->bw, (uint32_t)im->num_functions);
  for (size_t f = 0; f < im->num_functions; f++) {
    kiln_bw_str(&w->bw, im->names[f]);
    kiln_bw_u32(&w->bw, (uint32_t)o->function_object[f]);
  }
  kiln_bw_u32(&w->bw, (uint32_t)o->num_objects);
  for (int32_t j = 0; j < o->num_objects; j++) {
    kiln_bw_str(&w->bw, o->symbols[j]);
    kiln_bw_bytes(&w->bw, o->data[j], o->sizes[j]);
  }
}

kiln_status kiln_executable_desc_serialize(const kiln_executable_desc_t *d, void **out,
                                           size_t *len) {
  if (out) *out = NULL;
  if (len) *len = 0;
  if (!d || !out || !len) return KILN_ERR_INVALID("serialize executable: NULL argument");
  writer_t w;
  memset(&w, 0, sizeof(w));
  kiln_bw_str(&w.bw, d->name);
  kiln_bw_u32(&w.bw, (uint32_t)d->num_allocations);
  for (int32_t i = 0; i < d->num_allocations; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    kiln_bw_u8(&w.bw, (uint8_t)a->kind);
    kiln_bw_u64(&w.bw, a->size);
    kiln_bw_u32(&w.bw, (uint32_t)a->parameter);
    kiln_bw_u8(&w.bw, a->donated);
    if (a->kind == KILN_EXEC_ALLOC_CONSTANT) kiln_bw_bytes(&w.bw, a->data, a->data ? a->size : 0);
  }
  kiln_bw_u32(&w.bw, (uint32_t)d->num_parameters);
  for (int32_t i = 0; i < d->num_parameters; i++) kiln_bw_u64(&w.bw, d->parameter_sizes[i]);
  kiln_bw_u32(&w.bw, (uint32_t)d->num_outputs);
  for (int32_t i = 0; i < d->num_outputs; i++) put_slice(&w, d->outputs[i].slice);
  kiln_bw_u32(&w.bw, (uint32_t)d->num_images);
  for (int32_t i = 0; i < d->num_images; i++) put_image(&w, d, i);
  put_seq(&w, &d->thunks);
  if (w.err) {
    kiln_strbuf_free(&w.bw.b);
    return kiln_status_annotate(w.err, "serializing executable %s", d->name);
  }
  /* The header, then the payload. */
  writer_t h;
  memset(&h, 0, sizeof(h));
  kiln_strbuf_append_n(&h.bw.b, kMagic, sizeof(kMagic));
  kiln_bw_u32(&h.bw, KILN_EXEC_FORMAT_VERSION);
  kiln_bw_u32(&h.bw, 0);
  kiln_bw_u64(&h.bw, w.bw.b.len);
  uint64_t sum[2];
  kiln_hasher_t hs;
  kiln_hash_init(&hs, HASH_SEED);
  kiln_hash_update(&hs, w.bw.b.data ? w.bw.b.data : "", w.bw.b.len);
  kiln_hash_final(&hs, sum);
  kiln_bw_u64(&h.bw, sum[0]);
  kiln_bw_u64(&h.bw, sum[1]);
  kiln_bw_str(&h.bw, KILN_VERSION_STRING);
  kiln_strbuf_append_n(&h.bw.b, w.bw.b.data ? w.bw.b.data : "", w.bw.b.len);
  kiln_strbuf_free(&w.bw.b);
  *len = h.bw.b.len;
  *out = h.bw.b.data;
  return NULL;
}

void kiln_executable_blob_reseal(void *data, size_t len) {
  unsigned char *b = data;
  if (!b || len < 44) return; /* magic, version, flags, length, checksum, version length */
  uint32_t vlen =
      (uint32_t)b[40] | (uint32_t)b[41] << 8 | (uint32_t)b[42] << 16 | (uint32_t)b[43] << 24;
  if (vlen > len - 44) return;
  size_t h = 44 + vlen;
  kiln_hasher_t hs;
  kiln_hash_init(&hs, HASH_SEED);
  kiln_hash_update(&hs, b + h, len - h);
  uint64_t sum[2];
  kiln_hash_final(&hs, sum);
  for (int w = 0; w < 2; w++)
    for (int i = 0; i < 8; i++) b[24 + 8 * w + i] = (unsigned char)(sum[w] >> (8 * i));
}

/* ---- reading ----------------------------------------------------------------------------- */

typedef struct reader {
  kiln_byte_reader_t in; /* its err: the first error; later reads return zeros */
  int32_t num_allocations, num_images;
  const uint64_t *alloc_sizes;
  kiln_exec_custom_call_resolver_fn resolve;
  void *user;
  kiln_executable_desc_t *d;
} reader_t;

static kiln_slice_t get_slice(reader_t *r, bool may_be_absent, const char *what) {
  kiln_slice_t s;
  s.allocation = (int32_t)kiln_br_u32(&r->in, what);
  s.offset = (int64_t)kiln_br_u64(&r->in, what);
  s.size = (int64_t)kiln_br_u64(&r->in, what);
  if (r->in.err) return kiln_slice_make(-1, 0, 0);
  if (s.allocation == -1 && may_be_absent) return s;
  if (s.allocation < 0 || s.allocation >= r->num_allocations || s.offset < 0 || s.size < 0 ||
      (uint64_t)s.offset > r->alloc_sizes[s.allocation] ||
      (uint64_t)s.size > r->alloc_sizes[s.allocation] - (uint64_t)s.offset) {
    kiln_br_fail(&r->in, KILN_ERR_INVALID("%s: slice a%d+%lld:%lld outside the %d allocations",
                                          what, s.allocation, (long long)s.offset,
                                          (long long)s.size, r->num_allocations));
    return kiln_slice_make(-1, 0, 0);
  }
  return s;
}

static void get_seq(reader_t *r, kiln_thunk_seq_t *s, int depth);

static kiln_thunk_t *get_kernel(reader_t *r, const char *name) {
  int32_t module = (int32_t)kiln_br_u32(&r->in, "kernel module");
  char *kname = kiln_br_str(&r->in, "kernel name");
  kiln_launch_dims_t dims;
  for (int i = 0; i < 3; i++) dims.grid[i] = kiln_br_u32(&r->in, "grid");
  for (int i = 0; i < 3; i++) dims.block[i] = kiln_br_u32(&r->in, "block");
  dims.shared_bytes = kiln_br_u32(&r->in, "shared bytes");
  uint32_t n = kiln_br_count(&r->in, 9, "kernel arguments");
  kiln_kernel_arg_t *args = kiln_calloc((size_t)n + 1, sizeof(*args));
  for (uint32_t i = 0; i < n && !r->in.err; i++) {
    args[i].is_scalar = kiln_br_u8(&r->in, "argument kind") != 0;
    if (args[i].is_scalar)
      args[i].scalar = kiln_br_u64(&r->in, "scalar argument");
    else
      args[i].slice = get_slice(r, false, "kernel argument");
  }
  if (!r->in.err && (module < 0 || module >= r->num_images))
    kiln_br_fail(&r->in,
                 KILN_ERR_INVALID("kernel %s: module %d of %d", name, module, r->num_images));
  kiln_thunk_t *t = NULL;
  if (!r->in.err) {
    t = kiln_thunk_kernel_create(name, NULL, kname, &dims, args, (int)n);
    kiln_thunk_kernel_set_module_index(t, module);
  }
  kiln_free(args);
  kiln_free(kname);
  return t;
}

static kiln_thunk_t *get_gemm(reader_t *r, const char *name) {
  kiln_gemm_desc_t g;
  memset(&g, 0, sizeof(g));
  uint32_t dt = kiln_br_u32(&r->in, "gemm type"), ot = kiln_br_u32(&r->in, "gemm output type");
  g.batch = (int64_t)kiln_br_u64(&r->in, "gemm batch");
  g.m = (int64_t)kiln_br_u64(&r->in, "gemm m");
  g.n = (int64_t)kiln_br_u64(&r->in, "gemm n");
  g.k = (int64_t)kiln_br_u64(&r->in, "gemm k");
  g.trans_a = kiln_br_u8(&r->in, "gemm trans_a") != 0;
  g.trans_b = kiln_br_u8(&r->in, "gemm trans_b") != 0;
  g.alpha = kiln_br_f64(&r->in, "gemm alpha");
  g.beta = kiln_br_f64(&r->in, "gemm beta");
  kiln_slice_t a = get_slice(r, false, "gemm A"), b = get_slice(r, false, "gemm B"),
               c = get_slice(r, false, "gemm C");
  uint8_t epilogue = kiln_br_u8(&r->in, "gemm epilogue");
  uint8_t has_bias = kiln_br_u8(&r->in, "gemm bias");
  kiln_slice_t bias = has_bias ? get_slice(r, false, "gemm bias") : kiln_slice_make(-1, 0, 0);
  if (r->in.err) return NULL;
  if (dt < KILN_GEMM_F32 || dt > KILN_GEMM_U32 || ot > KILN_GEMM_U32 ||
      epilogue > KILN_GEMM_EPILOGUE_GELU_TANH || has_bias > 1) {
    kiln_br_fail(&r->in, KILN_ERR_INVALID("gemm %s: element types %u -> %u, epilogue %u, bias %u",
                                          name, dt, ot, epilogue, has_bias));
    return NULL;
  }
  g.dtype = (kiln_gemm_dtype_t)dt;
  g.out_dtype = (kiln_gemm_dtype_t)ot;
  g.epilogue = (kiln_gemm_epilogue_t)epilogue;
  g.bias = has_bias; /* for the check only: a bias needs a real floating-point C */
  size_t ab, bb, cb;
  kiln_status s = kiln_gemm_desc_check(&g, &ab, &bb, &cb);
  g.bias = 0;
  if (!s && has_bias &&
      (uint64_t)bias.size < (uint64_t)g.n * kiln_gemm_dtype_size(kiln_gemm_desc_out_dtype(&g)))
    s = KILN_ERR_INVALID("bias slice of %lld bytes for n = %lld", (long long)bias.size,
                         (long long)g.n);
  if (s) {
    kiln_br_fail(&r->in, kiln_status_annotate(s, "gemm %s", name));
    return NULL;
  }
  kiln_thunk_t *t = kiln_thunk_gemm_create(name, &g, a, b, c);
  if (has_bias) kiln_thunk_gemm_set_bias(t, bias);
  return t;
}

/* A collective: its description read whole, then checked as a loader would before trusting
 * it (kiln_coll_thunk_desc_check: the group table, the counts against the slices). */
static kiln_thunk_t *get_collective(reader_t *r, const char *name) {
  uint8_t op = kiln_br_u8(&r->in, "collective op");
  uint8_t reduction = kiln_br_u8(&r->in, "collective reduction");
  uint8_t phase = kiln_br_u8(&r->in, "collective phase");
  uint32_t nr = kiln_br_u32(&r->in, "collective replicas");
  uint32_t np = kiln_br_u32(&r->in, "collective partitions");
  uint32_t nb = kiln_br_count(&r->in, 2 * 20 + 1 + 4 * 8, "collective operands");
  if (r->in.err) return NULL;
  if (nr < 1 || np < 1 || (uint64_t)nr * np > KILN_COLL_THUNK_MAX_PARTICIPANTS || nb < 1) {
    kiln_br_fail(&r->in, KILN_ERR_INVALID("collective %s: %u replicas x %u partitions, %u operands",
                                          name, nr, np, nb));
    return NULL;
  }
  kiln_coll_thunk_desc_t *c =
      kiln_coll_thunk_desc_create((kiln_coll_thunk_op_t)op, (int)nb, (int)nr, (int)np);
  c->reduction = (kiln_coll_reduction_t)reduction;
  c->phase = (kiln_coll_thunk_phase_t)phase;
  for (uint32_t k = 0; k < nb && !r->in.err; k++) {
    kiln_coll_thunk_buffer_t *b = &c->buffers[k];
    b->send = get_slice(r, false, "collective operand");
    b->recv = get_slice(r, false, "collective result");
    b->dtype = (kiln_coll_dtype_t)kiln_br_u8(&r->in, "collective type");
    b->count = (int64_t)kiln_br_u64(&r->in, "collective count");
    b->outer = (int64_t)kiln_br_u64(&r->in, "collective outer");
    b->inner = (int64_t)kiln_br_u64(&r->in, "collective inner");
    b->block_bytes = (size_t)kiln_br_u64(&r->in, "collective block");
  }
  uint32_t n = kiln_br_count(&r->in, 8 + 3 * 4, "collective participants");
  if (!r->in.err && n != nr * np)
    kiln_br_fail(&r->in, KILN_ERR_INVALID("collective %s: %u participants in a world of %u x %u",
                                          name, n, nr, np));
  for (uint32_t i = 0; i < n && !r->in.err; i++) {
    c->group_key[i] = (int64_t)kiln_br_u64(&r->in, "collective group");
    c->rank[i] = (int32_t)kiln_br_u32(&r->in, "collective rank");
    c->group_size[i] = (int32_t)kiln_br_u32(&r->in, "collective group size");
    c->source[i] = (int32_t)kiln_br_u32(&r->in, "collective source");
  }
  if (!r->in.err) {
    kiln_status s = kiln_coll_thunk_desc_check(c, name);
    if (s) kiln_br_fail(&r->in, s);
  }
  if (r->in.err) {
    kiln_coll_thunk_desc_destroy(c);
    return NULL;
  }
  return kiln_thunk_collective_create(name, c);
}

static kiln_thunk_t *get_custom_call(reader_t *r, const char *name) {
  char *target = kiln_br_str(&r->in, "custom-call target");
  uint64_t rlen;
  const void *recipe = kiln_br_bytes(&r->in, &rlen, "custom-call recipe");
  uint32_t no = kiln_br_count(&r->in, 20, "custom-call operands");
  kiln_slice_t *ops = kiln_calloc((size_t)no + 1, sizeof(*ops));
  for (uint32_t i = 0; i < no && !r->in.err; i++)
    ops[i] = get_slice(r, false, "custom-call operand");
  uint32_t nr = kiln_br_count(&r->in, 20, "custom-call results");
  kiln_slice_t *res = kiln_calloc((size_t)nr + 1, sizeof(*res));
  for (uint32_t i = 0; i < nr && !r->in.err; i++)
    res[i] = get_slice(r, false, "custom-call result");
  kiln_thunk_t *t = NULL;
  if (!r->in.err) {
    if (!r->resolve) {
      kiln_br_fail(&r->in,
                   KILN_ERR_UNIMPLEMENTED("custom call %s (target %s): no resolver to rebuild it",
                                          name, target));
    } else {
      kiln_status s = r->resolve(r->user, r->d, name, target, recipe, (size_t)rlen, ops, (int)no,
                                 res, (int)nr, &t);
      if (s)
        kiln_br_fail(
            &r->in, kiln_status_annotate(s, "rebuilding custom call %s (target %s)", name, target));
      if (!s && !t)
        kiln_br_fail(&r->in, KILN_ERR_INTERNAL("custom call %s: the resolver made no thunk", name));
    }
  }
  kiln_free(ops);
  kiln_free(res);
  kiln_free(target);
  return t;
}

static kiln_thunk_t *get_thunk(reader_t *r, int depth) {
  uint8_t kind = kiln_br_u8(&r->in, "thunk kind");
  char *name = kiln_br_str(&r->in, "thunk name");
  kiln_thunk_t *t = NULL;
  if (r->in.err) goto done;
  switch (kind) {
    case KILN_THUNK_KERNEL:
      t = get_kernel(r, name);
      break;
    case KILN_THUNK_COPY: {
      uint8_t dir = kiln_br_u8(&r->in, "copy direction");
      kiln_slice_t src = get_slice(r, false, "copy source");
      kiln_slice_t dst = get_slice(r, false, "copy destination");
      int64_t size = (int64_t)kiln_br_u64(&r->in, "copy size");
      if (!r->in.err && (dir != KILN_COPY_D2D || size < 0 || size > src.size || size > dst.size))
        kiln_br_fail(&r->in, KILN_ERR_INVALID("copy %s: direction %u, %lld bytes", name, dir,
                                              (long long)size));
      if (!r->in.err) t = kiln_thunk_copy_create(name, KILN_COPY_D2D, src, dst, NULL, size);
      break;
    }
    case KILN_THUNK_MEMSET: {
      kiln_slice_t dst = get_slice(r, false, "memset destination");
      uint32_t pattern = kiln_br_u32(&r->in, "memset pattern");
      uint32_t es = kiln_br_u32(&r->in, "memset element size");
      if (!r->in.err && es != 1 && es != 2 && es != 4)
        kiln_br_fail(&r->in, KILN_ERR_INVALID("memset %s: element size %u", name, es));
      if (!r->in.err) t = kiln_thunk_memset_create(name, dst, pattern, (int)es);
      break;
    }
    case KILN_THUNK_GEMM:
      t = get_gemm(r, name);
      break;
    case KILN_THUNK_CUSTOM_CALL:
      t = get_custom_call(r, name);
      break;
    case KILN_THUNK_COLLECTIVE:
      t = get_collective(r, name);
      break;
    case KILN_THUNK_WHILE: {
      kiln_thunk_seq_t cond, body;
      kiln_thunk_seq_init(&cond);
      kiln_thunk_seq_init(&body);
      get_seq(r, &cond, depth + 1);
      kiln_slice_t pred = get_slice(r, false, "while pred");
      get_seq(r, &body, depth + 1);
      int64_t max_it = (int64_t)kiln_br_u64(&r->in, "while bound");
      if (!r->in.err && max_it < 0)
        kiln_br_fail(&r->in, KILN_ERR_INVALID("while %s: bound %lld", name, (long long)max_it));
      if (!r->in.err) t = kiln_thunk_while_create(name, &cond, pred, &body, max_it);
      kiln_thunk_seq_free(&cond);
      kiln_thunk_seq_free(&body);
      break;
    }
    case KILN_THUNK_CONDITIONAL: {
      kiln_slice_t index = get_slice(r, false, "conditional index");
      bool is_pred = kiln_br_u8(&r->in, "conditional pred") != 0;
      uint32_t nb = kiln_br_count(&r->in, 4, "conditional branches");
      if (!r->in.err && nb == 0)
        kiln_br_fail(&r->in, KILN_ERR_INVALID("conditional %s has no branch", name));
      kiln_thunk_seq_t *br = kiln_calloc((size_t)nb + 1, sizeof(*br));
      for (uint32_t i = 0; i < nb; i++) kiln_thunk_seq_init(&br[i]);
      for (uint32_t i = 0; i < nb && !r->in.err; i++) get_seq(r, &br[i], depth + 1);
      if (!r->in.err) t = kiln_thunk_conditional_create(name, index, is_pred, br, (int)nb);
      for (uint32_t i = 0; i < nb; i++) kiln_thunk_seq_free(&br[i]);
      kiln_free(br);
      break;
    }
    case KILN_THUNK_SEQUENTIAL:
    case KILN_THUNK_COMMAND_BUFFER: {
      kiln_thunk_seq_t seq;
      kiln_thunk_seq_init(&seq);
      get_seq(r, &seq, depth + 1);
      if (!r->in.err) {
        if (kind == KILN_THUNK_SEQUENTIAL) {
          t = kiln_thunk_sequential_create(name, &seq);
        } else {
          kiln_status s = kiln_command_buffer_thunk_create(name, &seq, &t);
          if (s) kiln_br_fail(&r->in, s);
        }
      }
      kiln_thunk_seq_free(&seq);
      break;
    }
    default:
      kiln_br_fail(&r->in, KILN_ERR_INVALID("thunk %s: unknown kind %u", name, kind));
      break;
  }
done:
  kiln_free(name);
  return t;
}

static void get_seq(reader_t *r, kiln_thunk_seq_t *s, int depth) {
  if (depth > KILN_EXEC_MAX_DEPTH) {
    kiln_br_fail(&r->in, KILN_ERR_INVALID("thunks nested deeper than %d", KILN_EXEC_MAX_DEPTH));
    return;
  }
  uint32_t n = kiln_br_count(&r->in, 5, "thunk sequence");
  for (uint32_t i = 0; i < n && !r->in.err; i++) {
    kiln_thunk_t *t = get_thunk(r, depth);
    if (t) kiln_thunk_seq_push(s, t);
  }
  if (!r->in.err) {
    kiln_status st = kiln_thunk_seq_check_async_pairs(s);
    if (st) kiln_br_fail(&r->in, st);
  }
}

static void get_image(reader_t *r, kiln_executable_desc_t *d) {
  uint8_t kind = kiln_br_u8(&r->in, "image kind");
  if (r->in.err) return;
  if (kind == IMAGE_BYTES) {
    uint64_t n;
    const void *data = kiln_br_bytes(&r->in, &n, "image");
    if (!r->in.err) kiln_executable_desc_add_image(d, data, (size_t)n, NULL, NULL, 0);
    return;
  }
  if (kind != IMAGE_HOST_OBJECTS) {
    kiln_br_fail(&r->in, KILN_ERR_INVALID("image %d: unknown kind %u", d->num_images, kind));
    return;
  }
  uint32_t nf = kiln_br_count(&r->in, 8, "image functions");
  if (!r->in.err && nf == 0)
    kiln_br_fail(&r->in, KILN_ERR_INVALID("host image %d has no function", d->num_images));
  char **names = kiln_calloc((size_t)nf + 1, sizeof(*names));
  int32_t *fobj = kiln_calloc((size_t)nf + 1, sizeof(*fobj));
  for (uint32_t f = 0; f < nf && !r->in.err; f++) {
    names[f] = kiln_br_str(&r->in, "function name");
    fobj[f] = (int32_t)kiln_br_u32(&r->in, "function object");
  }
  uint32_t no = kiln_br_count(&r->in, 12, "image objects");
  char **syms = kiln_calloc((size_t)no + 1, sizeof(*syms));
  const void **data = kiln_calloc((size_t)no + 1, sizeof(*data));
  size_t *sizes = kiln_calloc((size_t)no + 1, sizeof(*sizes));
  for (uint32_t j = 0; j < no && !r->in.err; j++) {
    syms[j] = kiln_br_str(&r->in, "object symbol");
    uint64_t n;
    data[j] = kiln_br_bytes(&r->in, &n, "object");
    sizes[j] = (size_t)n;
  }
  for (uint32_t f = 0; f < nf && !r->in.err; f++)
    if (fobj[f] < 0 || (uint32_t)fobj[f] >= no)
      kiln_br_fail(&r->in, KILN_ERR_INVALID("function %s: object %d of %u", names[f], fobj[f], no));
  if (!r->in.err) {
    int32_t i = kiln_executable_desc_add_image(d, NULL, 0, (const char *const *)names, NULL, nf);
    kiln_executable_desc_set_image_objects(d, i, (int32_t)no, (const char *const *)syms, data,
                                           sizes, fobj);
  }
  for (uint32_t f = 0; f < nf; f++) kiln_free(names[f]);
  for (uint32_t j = 0; j < no; j++) kiln_free(syms[j]);
  kiln_free(names);
  kiln_free(fobj);
  kiln_free(syms);
  kiln_free(data);
  kiln_free(sizes);
}

static void get_payload(reader_t *r, kiln_executable_desc_t *d) {
  uint32_t na = kiln_br_count(&r->in, 14, "allocations");
  uint64_t *sizes = kiln_calloc((size_t)na + 1, sizeof(*sizes));
  for (uint32_t i = 0; i < na && !r->in.err; i++) {
    kiln_exec_allocation_t a;
    memset(&a, 0, sizeof(a));
    uint8_t kind = kiln_br_u8(&r->in, "allocation kind");
    a.size = kiln_br_u64(&r->in, "allocation size");
    a.parameter = (int32_t)kiln_br_u32(&r->in, "allocation parameter");
    a.donated = kiln_br_u8(&r->in, "allocation donated") != 0;
    if (r->in.err) break;
    if (kind > KILN_EXEC_ALLOC_TEMP) {
      kiln_br_fail(&r->in, KILN_ERR_INVALID("allocation %u: unknown kind %u", i, kind));
      break;
    }
    a.kind = (kiln_exec_alloc_kind_t)kind;
    if (a.kind == KILN_EXEC_ALLOC_CONSTANT) {
      uint64_t n;
      const void *p = kiln_br_bytes(&r->in, &n, "constant");
      if (r->in.err) break;
      if (n != a.size) {
        kiln_br_fail(&r->in, KILN_ERR_INVALID("constant allocation %u: %llu bytes of %llu", i,
                                              (unsigned long long)n, (unsigned long long)a.size));
        break;
      }
      a.data = kiln_malloc(n ? (size_t)n : 1);
      if (n) memcpy(a.data, p, (size_t)n);
    }
    sizes[i] = a.size;
    kiln_executable_desc_add_allocation(d, &a);
  }
  r->num_allocations = d->num_allocations;
  r->alloc_sizes = sizes;
  uint32_t np = kiln_br_count(&r->in, 8, "parameters");
  d->parameter_sizes = kiln_calloc((size_t)np + 1, sizeof(uint64_t));
  for (uint32_t i = 0; i < np && !r->in.err; i++)
    d->parameter_sizes[i] = kiln_br_u64(&r->in, "parameter size");
  d->num_parameters = r->in.err ? 0 : (int32_t)np;
  for (int32_t i = 0; i < d->num_allocations && !r->in.err; i++) {
    const kiln_exec_allocation_t *a = &d->allocations[i];
    if (a->kind == KILN_EXEC_ALLOC_PARAMETER &&
        (a->parameter < 0 || a->parameter >= d->num_parameters))
      kiln_br_fail(&r->in, KILN_ERR_INVALID("allocation %d: parameter %d of %d", i, a->parameter,
                                            d->num_parameters));
  }
  uint32_t no = kiln_br_count(&r->in, 20, "outputs");
  d->outputs = kiln_calloc((size_t)no + 1, sizeof(*d->outputs));
  for (uint32_t i = 0; i < no && !r->in.err; i++)
    d->outputs[i].slice = get_slice(r, true, "output");
  d->num_outputs = r->in.err ? 0 : (int32_t)no;
  uint32_t ni = kiln_br_count(&r->in, 9, "images");
  for (uint32_t i = 0; i < ni && !r->in.err; i++) get_image(r, d);
  r->num_images = d->num_images;
  get_seq(r, &d->thunks, 0);
  if (!r->in.err && r->in.left)
    kiln_br_fail(&r->in, KILN_ERR_INVALID("%zu bytes after the thunks", r->in.left));
  kiln_free(sizes);
  r->alloc_sizes = NULL;
}

kiln_status kiln_executable_desc_deserialize(const void *data, size_t len,
                                             kiln_exec_custom_call_resolver_fn resolve, void *user,
                                             kiln_executable_desc_t **out) {
  if (out) *out = NULL;
  if (!data || !out) return KILN_ERR_INVALID("deserialize executable: NULL argument");
  reader_t r;
  memset(&r, 0, sizeof(r));
  r.in.p = data;
  r.in.left = len;
  const unsigned char *magic = kiln_br_take(&r.in, sizeof(kMagic), "magic");
  if (magic && memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    kiln_br_fail(&r.in, KILN_ERR_INVALID("not a serialized kiln executable (magic)"));
  uint32_t version = kiln_br_u32(&r.in, "format version");
  uint32_t flags = kiln_br_u32(&r.in, "flags");
  if (!r.in.err && flags != 0) kiln_br_fail(&r.in, KILN_ERR_INVALID("unknown flags %#x", flags));
  if (!r.in.err && version != KILN_EXEC_FORMAT_VERSION)
    kiln_br_fail(&r.in,
                 kiln_status_make(KILN_FAILED_PRECONDITION, "format version %u, this kiln reads %u",
                                  version, KILN_EXEC_FORMAT_VERSION));
  uint64_t plen = kiln_br_u64(&r.in, "payload length");
  uint64_t sum[2];
  sum[0] = kiln_br_u64(&r.in, "checksum");
  sum[1] = kiln_br_u64(&r.in, "checksum");
  char *kv = kiln_br_str(&r.in, "kiln version");
  if (!r.in.err && strcmp(kv, KILN_VERSION_STRING) != 0)
    kiln_br_fail(
        &r.in, kiln_status_make(KILN_FAILED_PRECONDITION, "written by kiln %s, this is kiln %s", kv,
                                KILN_VERSION_STRING));
  kiln_free(kv);
  if (!r.in.err && plen != r.in.left)
    kiln_br_fail(&r.in, kiln_status_make(KILN_DATA_LOSS, "payload of %llu bytes, %zu present",
                                         (unsigned long long)plen, r.in.left));
  if (!r.in.err) {
    uint64_t got[2];
    kiln_hasher_t h;
    kiln_hash_init(&h, HASH_SEED);
    kiln_hash_update(&h, r.in.p, r.in.left);
    kiln_hash_final(&h, got);
    if (got[0] != sum[0] || got[1] != sum[1])
      kiln_br_fail(&r.in, kiln_status_make(KILN_DATA_LOSS, "payload checksum mismatch"));
  }
  kiln_executable_desc_t *d = NULL;
  if (!r.in.err) {
    char *name = kiln_br_str(&r.in, "name");
    d = kiln_executable_desc_create(name);
    kiln_free(name);
    r.resolve = resolve;
    r.user = user;
    r.d = d;
    get_payload(&r, d);
  }
  if (r.in.err) {
    kiln_executable_desc_destroy(d);
    return kiln_status_annotate(r.in.err, "reading a serialized executable");
  }
  *out = d;
  return NULL;
}
