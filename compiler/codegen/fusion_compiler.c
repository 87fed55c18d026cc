/* Fusion compiler (see fusion_compiler.h). */
#include "base/clock.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/concat_emitter.h"
#include "compiler/codegen/dus_emitter.h"
#include "compiler/codegen/input_slices_emitter.h"
#include "compiler/codegen/reduction_emitter.h"
#include "compiler/codegen/scatter_emitter.h"
#include "compiler/codegen/transpose_emitter.h"
#include "compiler/codegen/sort_emitter.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "compiler/codegen/elemental.h"
#include "compiler/codegen/loop_emitter.h"
#include "compiler/codegen/partitioner.h"

/* ---- classification ---- */

const char *kiln_fusion_emitter_name(kiln_fusion_emitter_t e) {
  switch (e) {
    case KILN_FUSION_EMITTER_LOOP: return "loop";
    case KILN_FUSION_EMITTER_REDUCTION: return "reduction";
    case KILN_FUSION_EMITTER_TRANSPOSE: return "transpose";
    case KILN_FUSION_EMITTER_CONCATENATE: return "concatenate";
    case KILN_FUSION_EMITTER_SCATTER: return "scatter";
    case KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE: return "dynamic-update-slice";
    case KILN_FUSION_EMITTER_SORT: return "sort";
    case KILN_FUSION_EMITTER_INPUT_SLICES: return "input-slices";
  }
  return "?";
}

/* XLA's rule for a reduce that the reduction emitter takes: reduced or kept dims contiguous,
 * and the unnested reduction faster than the elemental loop (row: minor reduced size >= 32
 * or dividing 32; column: not too small). Default layouts: logical order is memory order. */
static bool is_reduce_hero(const kiln_hlo_instruction_t *r) {
  if (r->num_operands < 2) return false;
  const kiln_shape_t *in = r->operands[0]->shape;
  if (!kiln_shape_is_array(in) || in->rank == 0 || r->dimensions.n == 0) return false;
  bool red[KILN_KIR_MAX_RANK] = {0};
  for (int i = 0; i < r->dimensions.n; i++)
    if (r->dimensions.v[i] >= 0 && r->dimensions.v[i] < in->rank && in->rank <= KILN_KIR_MAX_RANK)
      red[r->dimensions.v[i]] = true;
  /* Drop size-1 dims: they do not affect contiguity. */
  int n = 0;
  int64_t dims[KILN_KIR_MAX_RANK];
  bool rr[KILN_KIR_MAX_RANK];
  for (int i = 0; i < in->rank && i < KILN_KIR_MAX_RANK; i++)
    if (in->dims[i] != 1) {
      dims[n] = in->dims[i];
      rr[n++] = red[i];
    }
  if (n == 0) return false;
  int runs_red = 0, runs_kept = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || rr[i] != rr[i - 1]) {
      if (rr[i]) runs_red++;
      else runs_kept++;
    }
  if (runs_red == 0) return false;
  if (runs_red > 1 && runs_kept > 1) return false;
  const int64_t warp = 32;
  if (rr[n - 1]) {
    int64_t minor = 1;
    for (int i = n - 1; i >= 0 && rr[i]; i--) minor *= dims[i];
    return minor >= warp || warp % minor == 0;
  }
  if (runs_red > 1) return false;
  int64_t major = 1, minor = 1;
  int i = n - 1;
  for (; i >= 0 && !rr[i]; i--) minor *= dims[i];
  for (; i >= 0 && rr[i]; i--) major *= dims[i];
  bool elemental = major < warp || (major < 2 * warp && minor < warp) ||
                   (major < 4 * warp && minor < 8) || (major < 8 * warp && minor < 3);
  return !elemental;
}

/* A transpose hero as XLA's rules pick it (kiln_hero_is_transpose_hero), including the form
 * that keeps a small minor dimension ("102"), except layout-changing copies (XLA's layout
 * normalization makes them transposes first; here the loop emitter's physical indexing
 * handles them): those are loop fusions. */
static bool is_transpose_hero(const kiln_hlo_instruction_t *t) {
  return t->opcode == KILN_OP_TRANSPOSE && kiln_hero_is_transpose_hero(t, NULL);
}

/* Whether `x` is a root of `c` (the root or a tuple root's operand) through bitcasts. */
static bool is_root_through_bitcasts(const kiln_hlo_computation_t *c, const kiln_hlo_instruction_t *x) {
  const kiln_hlo_instruction_t *r = c->root;
  int n = r->opcode == KILN_OP_TUPLE ? r->num_operands : 1;
  for (int i = 0; i < n; i++) {
    const kiln_hlo_instruction_t *y = r->opcode == KILN_OP_TUPLE ? r->operands[i] : r;
    while (y->opcode == KILN_OP_BITCAST && y->num_operands == 1) y = y->operands[0];
    if (y == x) return true;
  }
  return false;
}

kiln_fusion_emitter_t kiln_fusion_classify(const kiln_hlo_computation_t *c,
                                           const kiln_hlo_instruction_t **hero) {
  const kiln_hlo_instruction_t *dummy;
  if (!hero) hero = &dummy;
  *hero = NULL;
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    *hero = in;
    switch (in->opcode) {
      case KILN_OP_SCATTER: return KILN_FUSION_EMITTER_SCATTER;
      case KILN_OP_SORT: return KILN_FUSION_EMITTER_SORT;
      case KILN_OP_DYNAMIC_UPDATE_SLICE:
        /* A DUS root (through bitcasts) gets the DUS emitter (in place when its operand is a
         * parameter, else copy + update); a DUS under an epilogue is a loop, as in XLA. */
        if (is_root_through_bitcasts(c, in)) return KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE;
        break;
      default: break;
    }
  }
  for (size_t i = 0; i < c->instructions.len; i++) {
    const kiln_hlo_instruction_t *in = c->instructions.data[i];
    *hero = in;
    if (in->opcode == KILN_OP_REDUCE && is_reduce_hero(in)) return KILN_FUSION_EMITTER_REDUCTION;
    if (is_transpose_hero(in)) return KILN_FUSION_EMITTER_TRANSPOSE;
  }
  /* Concatenate (a hero concatenate of <= 4 operands, possibly under an epilogue) and input
   * slices as the hero analysis decides. */
  kiln_hero_analysis_t ha;
  kiln_status hs = kiln_hero_analyze(c, &ha);
  if (!hs && ha.emitter == KILN_HERO_EMITTER_CONCATENATE) {
    *hero = ha.hero;
    return KILN_FUSION_EMITTER_CONCATENATE;
  }
  if (!hs && ha.emitter == KILN_HERO_EMITTER_INPUT_SLICES) {
    *hero = ha.hero;
    return KILN_FUSION_EMITTER_INPUT_SLICES;
  }

  kiln_status_free(hs);
  *hero = NULL;
  return KILN_FUSION_EMITTER_LOOP;
}

/* ---- compiling ---- */

void kiln_fusion_dump_text(const char *dir, const char *name, const char *suffix, const char *text) {
  if (!dir || !*dir) return;
  mkdir(dir, 0777);
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s.%s", dir, name, suffix);
  FILE *fp = fopen(path, "w");
  if (!fp) return;
  fputs(text, fp);
  fclose(fp);
}

void kiln_fusion_sanitize_name(char *s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
      *s = '_';
}

/* kiln_fusion_kernel_emit before the launch-limit check. */
static kiln_status fusion_kernel_emit_unchecked(const kiln_hlo_computation_t *c,
                                                const kiln_fusion_compile_options_t *opts,
                                                kiln_fusion_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!c || !c->root) return KILN_ERR_INVALID("fusion compiler: no computation");
  const kiln_hlo_instruction_t *hero = NULL;
  kiln_fusion_emitter_t kind = kiln_fusion_classify(c, &hero);
  if (kind == KILN_FUSION_EMITTER_REDUCTION || kind == KILN_FUSION_EMITTER_TRANSPOSE) {
    /* The hero analysis decides between the hero emitter and the loop emitter (e.g. a
     * reduction whose roots are not compatible is emitted as a loop, as in XLA). */
    kiln_hero_analysis_t ha;
    KILN_RETURN_IF_ERROR(kiln_hero_analyze(c, &ha), "while choosing the emitter of %s", c->name);
    if (ha.emitter == KILN_HERO_EMITTER_REDUCTION) return kiln_reduction_kernel_emit(c, opts, NULL, out);
    if (ha.emitter == KILN_HERO_EMITTER_TRANSPOSE) return kiln_transpose_kernel_emit(c, opts, out);
    if (ha.emitter == KILN_HERO_EMITTER_LOOP) kind = KILN_FUSION_EMITTER_LOOP;
  }
  if (kind == KILN_FUSION_EMITTER_SORT) return kiln_sort_kernel_emit(c, opts, out);
  if (kind == KILN_FUSION_EMITTER_SCATTER) return kiln_scatter_kernel_emit(c, opts, out);
  if (kind == KILN_FUSION_EMITTER_DYNAMIC_UPDATE_SLICE) return kiln_dus_kernel_emit(c, opts, out);
  if (kind == KILN_FUSION_EMITTER_CONCATENATE) return kiln_concat_kernel_emit(c, opts, out);
  if (kind == KILN_FUSION_EMITTER_INPUT_SLICES) return kiln_input_slices_kernel_emit(c, opts, out);
  if (kind != KILN_FUSION_EMITTER_LOOP)
    return KILN_ERR_UNIMPLEMENTED("fusion %s needs the %s emitter (hero %s)", c->name,
                                  kiln_fusion_emitter_name(kind), hero ? hero->name : "?");
  double t0 = kiln_clock_ms();
  char name[128];
  snprintf(name, sizeof(name), "%s", opts && opts->kernel_name ? opts->kernel_name : c->name);
  if (!(opts && opts->kernel_name)) strncat(name, "_kernel", sizeof(name) - strlen(name) - 1);
  kiln_fusion_sanitize_name(name);
  const char *dump_dir = opts && opts->dump_dir ? opts->dump_dir : getenv("KILN_DUMP_TO");
  if (dump_dir && *dump_dir) {
    kiln_strbuf_t hb = {0};
    kiln_hlo_computation_print(&hb, c);
    kiln_fusion_dump_text(dump_dir, name, "40-hlo-fusion.txt", kiln_strbuf_cstr(&hb));
    kiln_strbuf_free(&hb);
  }

  out->ctx = kiln_affine_ctx_create();
  out->kir = kiln_kir_module_create(name, out->ctx);
  kiln_partition_t part;
  kiln_status s = kiln_partition_compute(out->ctx, c, NULL, NULL, &part);
  if (s) {
    kiln_fusion_kernel_free(out);
    return s;
  }
  if (dump_dir && *dump_dir) {
    kiln_strbuf_t pb = {0};
    kiln_partition_print(&part, &pb);
    kiln_fusion_dump_text(dump_dir, name, "41-partition.txt", kiln_strbuf_cstr(&pb));
    kiln_strbuf_free(&pb);
  }
  kiln_elemental_t elem;
  s = kiln_elemental_init(&elem, out->kir, c, &part);
  kiln_loop_kernel_info_t info;
  if (!s) {
    kiln_loop_emitter_options_t lo = {0};
    lo.device = opts ? opts->device : NULL;
    lo.no_vectorize = opts && opts->no_vectorize;
    s = kiln_loop_emit(out->kir, c, &part, &elem, name, &lo, &info);
  }
  if (!s) {
    out->grid = info.grid;
    out->num_inputs = elem.num_tensors;
    out->inputs = kiln_calloc((size_t)elem.num_tensors + 1, sizeof(*out->inputs));
    for (int i = 0; i < elem.num_tensors; i++) out->inputs[i] = elem.tensors[i];
    out->num_outputs = part.num_outputs;
    out->outputs = kiln_calloc((size_t)part.num_outputs + 1, sizeof(*out->outputs));
    for (int o = 0; o < part.num_outputs; o++) {
      const kiln_shape_t *sh = part.outputs[o].instr->shape;
      if (kiln_shape_is_tuple(sh)) sh = sh->elements[part.outputs[o].output_index];
      out->outputs[o] = sh;
    }
  }
  kiln_elemental_free(&elem);
  kiln_partition_free(&part);
  if (!s) s = kiln_kir_verify(out->kir);
  out->emit_ms = kiln_clock_ms() - t0;
  if (!s) {
    double t1 = kiln_clock_ms();
    kiln_kir_pipeline_options_t po = {0};
    po.dump_dir = dump_dir;
    po.dump_name = name;
    po.unroll_max_trip = opts ? opts->unroll_max_trip : 0;
    s = kiln_kir_pipeline_run(out->kir, &po);
    out->pipeline_ms = kiln_clock_ms() - t1;
  }
  if (s) {
    kiln_fusion_kernel_free(out);
    return kiln_status_annotate(s, "while compiling fusion %s", c->name);
  }
  return NULL;
}

/* Bytes of block-shared memory allocated in region `r` and the regions nested in it. */
static int64_t shared_bytes_in(const kiln_kir_region_t *r) {
  int64_t total = 0;
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_ALLOC_SHARED && op->num_results == 1) {
      const kiln_kir_type_t *t = op->results[0]->type;
      total += kiln_kir_type_num_elements(t) * (int64_t)kiln_elem_type_storage_bytes(t->elem);
    }
    for (uint32_t j = 0; j < op->num_regions; j++) total += shared_bytes_in(op->regions[j]);
  }
  return total;
}

bool kiln_fusion_excess_precision(const kiln_fusion_compile_options_t *opts) {
  if (opts && opts->strict_precision) return false;
  const char *e = getenv("KILN_ALLOW_EXCESS_PRECISION");
  if (e && (!strcmp(e, "0") || !strcmp(e, "false"))) return false;
  const char *x = getenv("XLA_FLAGS");
  const char *f = x ? strstr(x, "--xla_allow_excess_precision=") : NULL;
  if (f) {
    f += strlen("--xla_allow_excess_precision=");
    if (!strncmp(f, "false", 5) || !strncmp(f, "0", 1)) return false;
  }
  return true;
}

kiln_status kiln_fusion_kernel_emit(const kiln_hlo_computation_t *c,
                                    const kiln_fusion_compile_options_t *opts,
                                    kiln_fusion_kernel_t *out) {
  KILN_RETURN_IF_ERROR_PLAIN(fusion_kernel_emit_unchecked(c, opts, out));
  bool excess = kiln_fusion_excess_precision(opts);
  for (kiln_fusion_kernel_t *k = out; k; k = k->next)
    if (k->kir) k->kir->excess_precision = excess;
  /* Every launch of the chain must fit the target: a kernel that does not would fail at
   * launch on the GPU (or silently run a different grid on the host). */
  int idx = 0;
  for (const kiln_fusion_kernel_t *k = out; k; k = k->next, idx++) {
    const kiln_kir_func_t *f = k->kir ? kiln_kir_module_kernel(k->kir) : NULL;
    if (!f) continue;
    kiln_status s = kiln_launch_validate(f->block, f->grid, shared_bytes_in(f->body), false,
                                         opts ? opts->device : NULL);
    if (s) {
      kiln_fusion_kernel_free(out);
      return kiln_status_annotate(s, "kernel %d of fusion %s", idx, c->name);
    }
  }
  return NULL;
}

void kiln_fusion_kernel_free(kiln_fusion_kernel_t *k) {
  if (!k) return;
  kiln_fusion_kernel_t *next = k->next;
  while (next) {
    kiln_fusion_kernel_t *after = next->next;
    next->next = NULL;
    kiln_fusion_kernel_free(next);
    kiln_free(next);
    next = after;
  }
  if (k->kir) kiln_kir_module_destroy(k->kir);
  if (k->ctx) kiln_affine_ctx_destroy(k->ctx);
  kiln_free(k->inputs);
  kiln_free(k->outputs);
  memset(k, 0, sizeof(*k));
}

kiln_status kiln_fusion_kernel_compile_nvptx(const kiln_fusion_kernel_t *k,
                                             const kiln_nvptx_options_t *opts,
                                             kiln_nvptx_result_t *out) {
  return kiln_kir_compile_nvptx(k->kir, opts, out);
}

static kiln_status ptxas_check_one(const kiln_fusion_kernel_t *k, char **ptx) {
  kiln_nvptx_options_t o = {0};
  o.cubin_via = KILN_CUBIN_VIA_SKIP;
  o.dump_dir = "";
  kiln_nvptx_result_t r;
  kiln_status s = kiln_kir_compile_nvptx(k->kir, &o, &r);
  if (!s && !r.ptx) s = KILN_ERR_INTERNAL("no PTX produced");
  if (!s) {
    char *log = NULL;
    s = kiln_ptxas_check(r.ptx, KILN_NVPTX_DEFAULT_ARCH, &log);
    kiln_free(log);
    if (ptx) *ptx = kiln_strdup(r.ptx);
  }
  kiln_nvptx_result_free(&r);
  return s;
}

kiln_status kiln_fusion_kernel_ptxas_check(const kiln_fusion_kernel_t *k, char **ptx) {
  if (ptx) *ptx = NULL;
  for (const kiln_fusion_kernel_t *x = k; x; x = x->next) {
    char *one = NULL;
    kiln_status s = ptxas_check_one(x, ptx ? &one : NULL);
    if (ptx && one) {
      if (!*ptx) {
        *ptx = one;
      } else {
        kiln_strbuf_t b = {0};
        kiln_strbuf_printf(&b, "%s\n%s", *ptx, one);
        kiln_free(*ptx);
        kiln_free(one);
        *ptx = kiln_strbuf_take(&b);
      }
    }
    if (s) return s;
  }
  return NULL;
}
