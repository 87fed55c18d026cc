/* Gemm epilogue fusion; see gemm_epilogue.h. */
#include "compiler/passes/gemm_epilogue.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/literal.h"
#include "compiler/passes/fusion_util.h"
#include "compiler/passes/pass_util.h"

#define MARKER "kiln_gemm_epilogue"

/* ---- matching ---- */

static bool real_float(kiln_elem_type_t t) {
  return t == KILN_F32 || t == KILN_F64 || t == KILN_BF16 || t == KILN_F16;
}

static bool has_member(const kiln_gemm_epilogue_match_t *e, const kiln_hlo_instruction_t *in) {
  for (int i = 0; i < e->num_members; i++)
    if (e->members[i] == in) return true;
  return false;
}

static bool add_member(kiln_gemm_epilogue_match_t *e, kiln_hlo_instruction_t *in) {
  if (has_member(e, in)) return true;
  if (e->num_members == KILN_GEMM_EPILOGUE_MAX_MEMBERS) return false;
  e->members[e->num_members++] = in;
  return true;
}

/* A scalar constant, or a broadcast of one: its value. */
static bool scalar_splat(const kiln_hlo_instruction_t *in, double *v) {
  if (in->opcode == KILN_OP_BROADCAST && in->num_operands == 1) in = in->operands[0];
  if (in->opcode != KILN_OP_CONSTANT || !in->literal || in->literal->unknown) return false;
  const kiln_literal_t *l = in->literal;
  if (!l->shape || !kiln_shape_is_array(l->shape) || l->shape->rank != 0 || !l->data) return false;
  if (!real_float(l->shape->type)) return false;
  *v = kiln_literal_get_f64(l, 0);
  return true;
}

/* `in` is a splat of `want` (within the type's tolerance) with x's shape; recorded. */
static bool const_member(kiln_gemm_epilogue_match_t *e, kiln_hlo_instruction_t *in, double want,
                         const kiln_shape_t *like) {
  double v;
  if (!scalar_splat(in, &v) || !kiln_pass_same_shape(in->shape, like)) return false;
  double tol = like->type == KILN_BF16 || like->type == KILN_F16 ? 1e-2 : 1e-5;
  if (!(fabs(v - want) <= tol * fabs(want))) return false;
  return add_member(e, in);
}

/* `in` is a binary `op` of x's shape: its operands. */
static bool binary(const kiln_hlo_instruction_t *in, kiln_hlo_opcode_t op, const kiln_shape_t *like,
                   kiln_hlo_instruction_t **a, kiln_hlo_instruction_t **b) {
  if (in->opcode != op || in->num_operands != 2 || !kiln_pass_same_shape(in->shape, like))
    return false;
  *a = in->operands[0];
  *b = in->operands[1];
  return true;
}

/* x * (x * x) in either order. */
static bool match_cube(kiln_gemm_epilogue_match_t *e, kiln_hlo_instruction_t *in,
                       kiln_hlo_instruction_t *x) {
  kiln_hlo_instruction_t *a, *b, *p, *q;
  if (!binary(in, KILN_OP_MULTIPLY, x->shape, &a, &b)) return false;
  for (int s = 0; s < 2; s++) {
    kiln_hlo_instruction_t *u = s ? b : a, *w = s ? a : b;
    if (u != x || !binary(w, KILN_OP_MULTIPLY, x->shape, &p, &q) || p != x || q != x) continue;
    return add_member(e, in) && add_member(e, w);
  }
  return false;
}

/* 1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)), every commutative op in either order. */
static bool match_gelu_cdf_sum(kiln_gemm_epilogue_match_t *e, kiln_hlo_instruction_t *in,
                               kiln_hlo_instruction_t *x) {
  const kiln_shape_t *sh = x->shape;
  kiln_hlo_instruction_t *a, *b;
  if (!binary(in, KILN_OP_ADD, sh, &a, &b)) return false;
  for (int s = 0; s < 2; s++) {
    kiln_gemm_epilogue_match_t save = *e;
    kiln_hlo_instruction_t *one = s ? b : a, *t = s ? a : b, *u, *v, *w, *y, *z;
    bool ok = const_member(e, one, 1.0, sh) && t->opcode == KILN_OP_TANH && t->num_operands == 1 &&
              kiln_pass_same_shape(t->shape, sh) && add_member(e, t);
    u = ok ? t->operands[0] : NULL;
    ok = ok && binary(u, KILN_OP_MULTIPLY, sh, &v, &w) && add_member(e, u);
    for (int s2 = 0; ok && s2 < 2; s2++) {
      kiln_gemm_epilogue_match_t save2 = *e;
      kiln_hlo_instruction_t *c = s2 ? w : v, *sum = s2 ? v : w;
      bool ok2 = const_member(e, c, 0.7978845608028654, sh) &&
                 binary(sum, KILN_OP_ADD, sh, &y, &z) && add_member(e, sum);
      for (int s3 = 0; ok2 && s3 < 2; s3++) {
        kiln_gemm_epilogue_match_t save3 = *e;
        kiln_hlo_instruction_t *xx = s3 ? z : y, *sc = s3 ? y : z, *p, *q;
        bool ok3 = xx == x && binary(sc, KILN_OP_MULTIPLY, sh, &p, &q) && add_member(e, sc);
        for (int s4 = 0; ok3 && s4 < 2; s4++) {
          kiln_gemm_epilogue_match_t save4 = *e;
          if (const_member(e, s4 ? q : p, 0.044715, sh) && match_cube(e, s4 ? p : q, x) &&
              add_member(e, in))
            return true;
          *e = save4;
        }
        *e = save3;
      }
      *e = save2;
    }
    *e = save;
  }
  return false;
}

/* x * (0.5 * S) or (0.5 * x) * S with S the sum above, rooted at `in`. */
static bool match_gelu(kiln_gemm_epilogue_match_t *e, kiln_hlo_instruction_t *in,
                       kiln_hlo_instruction_t *x) {
  const kiln_shape_t *sh = x->shape;
  kiln_hlo_instruction_t *a, *b, *p, *q;
  if (!binary(in, KILN_OP_MULTIPLY, sh, &a, &b)) return false;
  for (int s = 0; s < 2; s++) {
    kiln_hlo_instruction_t *l = s ? b : a, *r = s ? a : b;
    if (!binary(r, KILN_OP_MULTIPLY, sh, &p, &q)) continue;
    for (int s2 = 0; s2 < 2; s2++) {
      kiln_hlo_instruction_t *half = s2 ? q : p, *other = s2 ? p : q;
      kiln_gemm_epilogue_match_t save = *e;
      /* x * (0.5 * S) */
      if (l == x && const_member(e, half, 0.5, sh) && add_member(e, r) &&
          match_gelu_cdf_sum(e, other, x) && add_member(e, in))
        return true;
      *e = save;
      /* (0.5 * x) * S, S being `l` */
      if (other == x && const_member(e, half, 0.5, sh) && add_member(e, r) &&
          match_gelu_cdf_sum(e, l, x) && add_member(e, in))
        return true;
      *e = save;
    }
  }
  return false;
}

/* Every user of `in` is a member. */
static bool users_inside(const kiln_gemm_epilogue_match_t *e, const kiln_hlo_instruction_t *in) {
  for (size_t i = 0; i < in->users.len; i++)
    if (!has_member(e, in->users.data[i])) return false;
  return true;
}

/* The only user of `x`, reading it once, with no control edges; else NULL. */
static kiln_hlo_instruction_t *only_user(const kiln_hlo_instruction_t *x) {
  if (x->users.len != 1 || x->control_successors.len || x == x->parent->root) return NULL;
  kiln_hlo_instruction_t *u = x->users.data[0];
  int reads = 0;
  for (int k = 0; k < u->num_operands; k++) reads += u->operands[k] == x;
  if (reads != 1 || u->num_control_predecessors) return NULL;
  return u;
}

/* The operand of binary `u` that is not `x`. */
static kiln_hlo_instruction_t *other_operand(const kiln_hlo_instruction_t *u,
                                             const kiln_hlo_instruction_t *x) {
  return u->operands[0] == x ? u->operands[1] : u->operands[0];
}

/* GELU rooted at `r` over `x`, closed (only `r` read outside it): recorded in `e`. */
static bool try_gelu_root(kiln_gemm_epilogue_match_t *e, kiln_hlo_instruction_t *r,
                          kiln_hlo_instruction_t *x) {
  kiln_gemm_epilogue_match_t save = *e;
  if (match_gelu(e, r, x) && users_inside(e, x)) {
    bool closed = true;
    for (int k = save.num_members; k < e->num_members && closed; k++) {
      kiln_hlo_instruction_t *mbr = e->members[k];
      bool is_const = mbr->opcode == KILN_OP_BROADCAST || mbr->opcode == KILN_OP_CONSTANT;
      if (mbr != r && !is_const && !users_inside(e, mbr)) closed = false;
      if (mbr->num_control_predecessors || mbr->control_successors.len) closed = false;
    }
    if (closed) {
      e->act = KILN_GEMM_ACT_GELU_TANH;
      e->root = r;
      return true;
    }
  }
  *e = save;
  return false;
}

bool kiln_gemm_epilogue_match(kiln_hlo_instruction_t *dot, kiln_gemm_types_t types,
                              kiln_gemm_epilogue_match_t *out) {
  memset(out, 0, sizeof(*out));
  if (!kiln_fusion_wrapper_is_gemm_for(dot, types, &out->form)) return false;
  if (!real_float(dot->shape->type)) return false;
  out->dot = out->root = dot;
  out->alpha = 1;
  out->members[out->num_members++] = dot;
  /* An empty gemm writes zeros (or nothing); nothing to fuse into it. */
  if (out->form.k == 0 || out->form.batch * out->form.m * out->form.n == 0) return true;
  kiln_hlo_instruction_t *x = dot, *u;
  const kiln_shape_t *sh = dot->shape;
  const int rank = sh->rank;
  bool scaled = false;
  for (;;) {
    u = only_user(x);
    if (!u || u->num_operands != 2 || !kiln_pass_same_shape(u->shape, sh)) break;
    kiln_hlo_instruction_t *y = other_operand(u, x);
    double v;
    if (u->opcode == KILN_OP_MULTIPLY && !scaled && !out->addend && !out->bias &&
        scalar_splat(y, &v) && kiln_pass_same_shape(y->shape, sh)) {
      if (!add_member(out, u) || !add_member(out, y)) break;
      out->alpha = v;
      scaled = true;
    } else if (u->opcode == KILN_OP_ADD && !out->bias && y->opcode == KILN_OP_BROADCAST &&
               rank >= 1 && y->num_operands == 1 && y->dimensions.n == 1 &&
               y->dimensions.v[0] == rank - 1 && sh->dims[rank - 1] == out->form.n &&
               kiln_shape_is_array(y->operands[0]->shape) && y->operands[0]->shape->rank == 1 &&
               y->operands[0]->shape->type == sh->type &&
               y->operands[0]->shape->dims[0] == out->form.n &&
               kiln_pass_same_shape(y->shape, sh)) {
      if (!add_member(out, u) || !add_member(out, y)) break;
      out->bias = y->operands[0];
    } else if (u->opcode == KILN_OP_ADD && !out->addend && y->opcode != KILN_OP_BROADCAST &&
               y->opcode != KILN_OP_CONSTANT && kiln_pass_same_shape(y->shape, sh)) {
      if (!add_member(out, u)) break;
      out->addend = y;
    } else {
      break;
    }
    x = u;
  }
  out->root = x;
  /* The activation. */
  u = only_user(x);
  if (u && u->opcode == KILN_OP_MAXIMUM && u->num_operands == 2 &&
      kiln_pass_same_shape(u->shape, sh)) {
    kiln_hlo_instruction_t *y = other_operand(u, x);
    if (kiln_pass_is_splat(y, KILN_SPLAT_POS_ZERO) &&
        (y->opcode == KILN_OP_BROADCAST || rank == 0)) {
      double v;
      if (scalar_splat(y, &v) && add_member(out, u) && add_member(out, y)) {
        out->act = KILN_GEMM_ACT_RELU;
        out->root = u;
      }
    }
    return true;
  }
  if (x->control_successors.len || x == x->parent->root) return true;
  /* GELU: x's users are the pattern's; try each multiply reading x, or reading one that
   * does ((0.5 * x) * S), as the root. */
  for (size_t i = 0; i < x->users.len; i++) {
    kiln_hlo_instruction_t *r1 = x->users.data[i];
    for (size_t j = 0; j <= r1->users.len; j++) {
      kiln_hlo_instruction_t *r = j == 0 ? r1 : r1->users.data[j - 1];
      if (try_gelu_root(out, r, x)) return true;
    }
  }
  return true;
}

const char *kiln_gemm_epilogue_describe(const kiln_gemm_epilogue_match_t *e, char *buf, size_t n) {
  static const char *const acts[] = {"", "relu", "gelu_tanh"};
  snprintf(buf, n, "%s%s%s%s%s%s%s", e->alpha != 1 ? "alpha" : "",
           e->alpha != 1 && e->addend ? "+" : "", e->addend ? "C" : "",
           (e->alpha != 1 || e->addend) && e->bias ? "+" : "", e->bias ? "bias" : "",
           (e->alpha != 1 || e->addend || e->bias) && e->act ? "+" : "", acts[e->act]);
  return buf;
}

bool kiln_gemm_epilogue_match_fusion(const kiln_hlo_instruction_t *fusion, kiln_gemm_types_t types,
                                     kiln_gemm_epilogue_match_t *out) {
  if (fusion->opcode != KILN_OP_FUSION || fusion->fusion_kind != KILN_HLO_FUSION_CUSTOM ||
      !fusion->backend_config || !strstr(fusion->backend_config, MARKER))
    return false;
  const kiln_hlo_computation_t *f = kiln_hlo_instruction_called(fusion, "calls");
  if (!f || !f->root) return false;
  kiln_hlo_instruction_t *dot = NULL;
  for (size_t i = 0; i < f->instructions.len; i++)
    if (f->instructions.data[i]->opcode == KILN_OP_DOT) {
      if (dot) return false;
      dot = f->instructions.data[i];
    }
  if (!dot || !kiln_gemm_epilogue_match(dot, types, out) || out->root != f->root) return false;
  /* Operands of the gemm and the epilogue come in as parameters. */
  for (int k = 0; k < 2; k++)
    if (dot->operands[k]->opcode != KILN_OP_PARAMETER) return false;
  if (out->addend && out->addend->opcode != KILN_OP_PARAMETER) return false;
  if (out->bias && out->bias->opcode != KILN_OP_PARAMETER) return false;
  return true;
}

/* ---- the pass ---- */

static kiln_status fuse_computation(kiln_hlo_computation_t *c, kiln_ptrmap_t *retired,
                                    bool *changed, kiln_gemm_types_t types) {
  KILN_VEC(kiln_hlo_instruction_t *) dots = {0};
  for (size_t i = 0; i < c->instructions.len; i++)
    if (c->instructions.data[i]->opcode == KILN_OP_DOT)
      kiln_vec_push(&dots, c->instructions.data[i]);
  kiln_status st = NULL;
  kiln_hlo_computation_defer_removals(c); /* each fusion removes its members */
  for (size_t i = 0; i < dots.len && !st; i++) {
    kiln_gemm_epilogue_match_t e;
    if (!kiln_gemm_epilogue_match(dots.data[i], types, &e) || e.root == e.dot) continue;
    bool dup[KILN_GEMM_EPILOGUE_MAX_MEMBERS];
    for (int k = 0; k < e.num_members; k++) {
      kiln_hlo_instruction_t *mbr = e.members[k];
      dup[k] = (mbr->opcode == KILN_OP_BROADCAST || mbr->opcode == KILN_OP_CONSTANT) &&
               !users_inside(&e, mbr);
    }
    char what[64];
    kiln_gemm_epilogue_describe(&e, what, sizeof what);
    /* The dot's name goes into the marker (its clone inside is renamed). */
    kiln_strbuf_t cfg = {0};
    kiln_strbuf_printf(&cfg, "{\"" MARKER "\":\"%s\",\"dot\":\"%s\"}", what, e.dot->name);
    kiln_hlo_instruction_t *fusion = NULL;
    st = kiln_fusion_create(c, e.num_members, e.members, dup, retired, &fusion);
    if (st) {
      kiln_strbuf_free(&cfg);
      break;
    }
    fusion->fusion_kind = KILN_HLO_FUSION_CUSTOM;
    fusion->backend_config = kiln_arena_strdup(&c->module->arena, kiln_strbuf_cstr(&cfg));
    fusion->backend_config_form = KILN_BACKEND_CONFIG_JSON;
    kiln_strbuf_free(&cfg);
    *changed = true;
  }
  kiln_hlo_computation_compact(c);
  kiln_vec_free(&dots);
  return st;
}

/* The running pass's target (kiln_fusion_run_on_computations takes no context; each thread
 * runs its own pipeline). */
static _Thread_local kiln_gemm_types_t t_types;

static kiln_status fuse_one(kiln_hlo_computation_t *c, kiln_fusion_scope_t *scope, bool *changed) {
  return fuse_computation(c, &scope->retired, changed, t_types);
}

kiln_status kiln_pass_gemm_epilogue_fusion(kiln_hlo_module_t *m, const kiln_pass_options_t *opts,
                                           bool *changed) {
  *changed = false;
  if (opts && opts->no_gemm_library) return NULL;
  kiln_gemm_types_t types = kiln_gemm_types_of(opts);
  /* Classic cuBLAS has no epilogues: on CUDA without cuBLASLt nothing fuses. */
  if (types == KILN_GEMM_TYPES_CUBLAS) return NULL;
  t_types = types;
  return kiln_fusion_run_on_computations(m, "gemm epilogue fusion", fuse_one, changed);
}
