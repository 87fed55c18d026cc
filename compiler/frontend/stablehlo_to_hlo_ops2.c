/* StableHLO -> HLO: ops with regions or dimension numbers (reduce, reduce_window,
 * select_and_scatter, sort, map, gather, scatter, convolution), custom_call, collectives. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler/frontend/stablehlo_to_hlo_internal.h"

kiln_status shc_window_attrs(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t rank,
                             const char *dims_name, const char **out);
kiln_status shc_conv_window(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t nspatial,
                            const int64_t *kernel_sizes, int64_t *pad_operand, const char **out);
kiln_status shc_const_operand_ints(shc_ctx_t *c, const kiln_mlir_op_t *op, int32_t i, int64_t **out,
                                   int32_t *n);

static int32_t rank_of(const kiln_mlir_type_t *t) {
  return t && t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
}

/* The shape of op's results: the one result's, or the tuple of all. */
static kiln_status results_shape(shc_ctx_t *c, const kiln_mlir_op_t *op, const char **sh) {
  if (op->num_results == 1) return shc_type_text(c, op->results[0].type, sh);
  return shc_results_tuple_shape(c, op, sh);
}

static kiln_status bind_results(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *v) {
  if (op->num_results == 1) {
    shc_bind(c, &op->results[0], v);
    return NULL;
  }
  return shc_bind_tuple_results(c, op, v);
}

static kiln_status field_ints(shc_ctx_t *c, const kiln_mlir_op_t *op, const kiln_mlir_attr_t *s,
                              const char *f, const char **text) {
  int64_t *d;
  int32_t n;
  SHC_TRY(shc_attr_ints(c, op, kiln_mlir_attr_field(s, f), f, &d, &n));
  *text = shc_ints_text(c, d, n);
  return NULL;
}

static const char *bool_text(const kiln_mlir_op_t *op, const char *name) {
  return shc_attr_int(kiln_mlir_op_attr(op, name), 0) ? "true" : "false";
}

static kiln_status convert_reduce(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 1) return SHC_INVALID(op, "expected a body");
  const char *sh, *ops, *body;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &body));
  int64_t *d;
  int32_t nd;
  SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "dimensions"), "dimensions", &d, &nd));
  return bind_results(c, op,
                      shc_emit(c, sh, "reduce(%s), dimensions=%s, to_apply=%s", ops,
                               shc_ints_text(c, d, nd), body));
}

static kiln_status convert_reduce_window(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 1) return SHC_INVALID(op, "expected a body");
  const char *sh, *ops, *body, *win;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &body));
  SHC_TRY(shc_window_attrs(c, op, rank_of(op->operands[0]->type), "window_dimensions", &win));
  return bind_results(c, op, shc_emit(c, sh, "reduce-window(%s)%s, to_apply=%s", ops, win, body));
}

static kiln_status convert_select_and_scatter(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 2) return SHC_INVALID(op, "expected select and scatter regions");
  const char *sh, *ops, *sel, *sct, *win;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, 3, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &sel));
  SHC_TRY(shc_region_computation(c, op, &op->regions[1], false, &sct));
  SHC_TRY(shc_window_attrs(c, op, rank_of(op->operands[0]->type), "window_dimensions", &win));
  return bind_results(
      c, op,
      shc_emit(c, sh, "select-and-scatter(%s)%s, select=%s, scatter=%s", ops, win, sel, sct));
}

static kiln_status convert_sort(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 1) return SHC_INVALID(op, "expected a comparator");
  const char *sh, *ops, *cmp;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &cmp));
  int64_t dim = shc_attr_int(kiln_mlir_op_attr(op, "dimension"), -1);
  if (dim < 0) dim += rank_of(op->operands[0]->type);
  return bind_results(
      c, op,
      shc_emit(c, sh, "sort(%s), dimensions={%" PRId64 "}, is_stable=%s, to_apply=%s", ops, dim,
               bool_text(op, "is_stable"), cmp));
}

static kiln_status convert_map(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 1) return SHC_INVALID(op, "expected a computation");
  const char *sh, *ops, *fn;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &fn));
  int64_t *d;
  int32_t nd;
  SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "dimensions"), "dimensions", &d, &nd));
  return bind_results(
      c, op,
      shc_emit(c, sh, "map(%s), dimensions=%s, to_apply=%s", ops, shc_ints_text(c, d, nd), fn));
}

static kiln_status convert_gather(shc_ctx_t *c, const kiln_mlir_op_t *op, bool dynamic) {
  const char *sh, *ops;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
  const kiln_mlir_attr_t *dn = kiln_mlir_op_attr(op, "dimension_numbers");
  if (!dn) return SHC_INVALID(op, "no dimension_numbers");
  const char *od, *cs, *ob, *sb, *sim, *ss;
  SHC_TRY(field_ints(c, op, dn, "offset_dims", &od));
  SHC_TRY(field_ints(c, op, dn, "collapsed_slice_dims", &cs));
  SHC_TRY(field_ints(c, op, dn, "operand_batching_dims", &ob));
  SHC_TRY(field_ints(c, op, dn, "start_indices_batching_dims", &sb));
  SHC_TRY(field_ints(c, op, dn, "start_index_map", &sim));
  int64_t ivd = shc_attr_int(kiln_mlir_attr_field(dn, "index_vector_dim"), 0);
  int64_t *d;
  int32_t nd;
  if (dynamic) {
    /* slice sizes must be a constant operand */
    const kiln_mlir_value_t *v = op->operands[2];
    const kiln_mlir_attr_t *val = v->def && !strcmp(v->def->name, "stablehlo.constant")
                                      ? kiln_mlir_op_attr(v->def, "value")
                                      : NULL;
    if (!val) return SHC_UNIMPL(op, "slice_sizes that are not a constant (dynamic shapes)");
    SHC_TRY(shc_attr_ints(c, op, val, "slice_sizes", &d, &nd));
  } else {
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_op_attr(op, "slice_sizes"), "slice_sizes", &d, &nd));
  }
  ss = shc_ints_text(c, d, nd);
  shc_bind(c, &op->results[0],
           shc_emit(c, sh,
                    "gather(%s), offset_dims=%s, collapsed_slice_dims=%s, "
                    "operand_batching_dims=%s, start_indices_batching_dims=%s, start_index_map=%s, "
                    "index_vector_dim=%" PRId64 ", slice_sizes=%s, indices_are_sorted=%s",
                    ops, od, cs, ob, sb, sim, ivd, ss, bool_text(op, "indices_are_sorted")));
  return NULL;
}

static kiln_status convert_scatter(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  if (op->num_regions != 1) return SHC_INVALID(op, "expected an update computation");
  const char *sh, *ops, *fn;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &fn));
  const kiln_mlir_attr_t *dn = kiln_mlir_op_attr(op, "scatter_dimension_numbers");
  if (!dn) return SHC_INVALID(op, "no scatter_dimension_numbers");
  const char *uw, *iw, *ib, *sb, *sd;
  SHC_TRY(field_ints(c, op, dn, "update_window_dims", &uw));
  SHC_TRY(field_ints(c, op, dn, "inserted_window_dims", &iw));
  SHC_TRY(field_ints(c, op, dn, "input_batching_dims", &ib));
  SHC_TRY(field_ints(c, op, dn, "scatter_indices_batching_dims", &sb));
  SHC_TRY(field_ints(c, op, dn, "scatter_dims_to_operand_dims", &sd));
  int64_t ivd = shc_attr_int(kiln_mlir_attr_field(dn, "index_vector_dim"), 0);
  return bind_results(
      c, op,
      shc_emit(
          c, sh,
          "scatter(%s), update_window_dims=%s, inserted_window_dims=%s, input_batching_dims=%s, "
          "scatter_indices_batching_dims=%s, scatter_dims_to_operand_dims=%s, "
          "index_vector_dim=%" PRId64 ", indices_are_sorted=%s, unique_indices=%s, to_apply=%s",
          ops, uw, iw, ib, sb, sd, ivd, bool_text(op, "indices_are_sorted"),
          bool_text(op, "unique_indices"), fn));
}

/* dim_labels: "b01f_01io->b01f" from the conv dimension numbers. */
static kiln_status conv_labels(shc_ctx_t *c, const kiln_mlir_op_t *op, const kiln_mlir_attr_t *dn,
                               int32_t rank, const char **labels, int64_t **kspatial,
                               int32_t *nspatial) {
  static const char *const pre[3] = {"input", "kernel", "output"};
  kiln_strbuf_t b = {0};
  int64_t *ks = NULL;
  int32_t nks = 0;
  for (int k = 0; k < 3; k++) {
    char lab[65];
    if (rank > 64) {
      kiln_strbuf_free(&b);
      return SHC_UNIMPL(op, "rank above 64");
    }
    memset(lab, '?', sizeof lab);
    lab[rank] = 0;
    char name[64];
    int64_t a, f;
    if (k == 1) {
      a = shc_attr_int(kiln_mlir_attr_field(dn, "kernel_input_feature_dimension"), -1);
      f = shc_attr_int(kiln_mlir_attr_field(dn, "kernel_output_feature_dimension"), -1);
    } else {
      snprintf(name, sizeof name, "%s_batch_dimension", pre[k]);
      a = shc_attr_int(kiln_mlir_attr_field(dn, name), -1);
      snprintf(name, sizeof name, "%s_feature_dimension", pre[k]);
      f = shc_attr_int(kiln_mlir_attr_field(dn, name), -1);
    }
    snprintf(name, sizeof name, "%s_spatial_dimensions", pre[k]);
    int64_t *sp;
    int32_t nsp;
    kiln_status s = shc_attr_ints(c, op, kiln_mlir_attr_field(dn, name), name, &sp, &nsp);
    if (s || a < 0 || a >= rank || f < 0 || f >= rank || nsp != rank - 2) {
      kiln_strbuf_free(&b);
      return s ? s : SHC_INVALID(op, "bad convolution dimension numbers");
    }
    lab[a] = k == 1 ? 'i' : 'b';
    lab[f] = k == 1 ? 'o' : 'f';
    for (int32_t i = 0; i < nsp; i++) {
      if (sp[i] < 0 || sp[i] >= rank) {
        kiln_strbuf_free(&b);
        return SHC_INVALID(op, "bad spatial dimension");
      }
      lab[sp[i]] = (char)('0' + i);
    }
    if (k == 1) {
      ks = sp;
      nks = nsp;
    }
    kiln_strbuf_append(&b, lab);
    if (k == 0) kiln_strbuf_append_char(&b, '_');
    if (k == 1) kiln_strbuf_append(&b, "->");
  }
  *labels = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  *kspatial = ks;
  *nspatial = nks;
  return NULL;
}

static kiln_status convert_convolution(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const char *sh, *ops, *labels = NULL, *win;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, 2, &ops));
  const kiln_mlir_attr_t *dn = kiln_mlir_op_attr(op, "dimension_numbers");
  if (!dn) return SHC_INVALID(op, "no dimension_numbers");
  int32_t rank = rank_of(op->operands[0]->type);
  int64_t *ksp = NULL;
  int32_t nsp = 0;
  SHC_TRY(conv_labels(c, op, dn, rank, &labels, &ksp, &nsp));
  const kiln_mlir_type_t *kt = op->operands[1]->type;
  int64_t sizes[64];
  for (int32_t i = 0; i < nsp; i++) sizes[i] = kt->dims[ksp[i]];
  int64_t *pad = NULL;
  if (op->num_operands == 3) {
    int32_t np;
    SHC_TRY(shc_const_operand_ints(c, op, 2, &pad, &np));
    if (np != 2 * nsp) return SHC_INVALID(op, "padding of the wrong length");
  }
  SHC_TRY(shc_conv_window(c, op, nsp, sizes, pad, &win));
  shc_bind(c, &op->results[0],
           shc_emit(c, sh,
                    "convolution(%s)%s, dim_labels=%s, feature_group_count=%" PRId64
                    ", batch_group_count=%" PRId64,
                    ops, win, labels, shc_attr_int(kiln_mlir_op_attr(op, "feature_group_count"), 1),
                    shc_attr_int(kiln_mlir_op_attr(op, "batch_group_count"), 1)));
  return NULL;
}

static bool is_struct(const kiln_mlir_attr_t *a, const char *name) {
  return a && a->kind == KILN_MLIR_ATTR_STRUCT && a->dialect && !strcmp(a->dialect, name);
}

/* An axis name as HLO's mesh text quotes it: 'name' (letters, digits, '_', '.', '-'). */
static kiln_status mesh_name(const kiln_mlir_op_t *op, const char *s, size_t n, kiln_strbuf_t *b) {
  bool ok = n > 0;
  for (size_t i = 0; i < n && ok; i++)
    ok = isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-';
  if (!ok)
    return SHC_INVALID(op,
                       "mesh axis name \"%.*s\" is empty or holds characters other than "
                       "letters, digits, '_', '.' and '-'",
                       (int)(n < 64 ? n : 64), s);
  kiln_strbuf_printf(b, "'%.*s'", (int)n, s);
  return NULL;
}

/* sdy.mesh's text, #sdy.mesh<["x"=2, "y"=4], device_ids=[...]>, as HLO's mesh['x'=2,'y'=4],
 * device_ids=(...). */
static kiln_status sdy_mesh_text(const kiln_mlir_op_t *op, const char *t, kiln_strbuf_t *b) {
  const char *p = t + strlen("#sdy.mesh<");
#define SKIP_WS() \
  while (*p == ' ' || *p == '\n' || *p == '\t') p++
  SKIP_WS();
  if (*p++ != '[') goto bad;
  size_t start = b->len;
  kiln_strbuf_append(b, "mesh[");
  SKIP_WS();
  for (int k = 0; *p != ']'; k++) {
    if (k && *p++ != ',') goto bad;
    SKIP_WS();
    if (*p++ != '"') goto bad;
    const char *name = p;
    while (*p && *p != '"') p++;
    if (*p != '"') goto bad;
    size_t n = (size_t)(p++ - name);
    if (k) kiln_strbuf_append_char(b, ',');
    SHC_TRY(mesh_name(op, name, n, b));
    SKIP_WS();
    char *end;
    if (*p++ != '=') goto bad;
    long long size = strtoll(p, &end, 10);
    if (end == p || size < 1) goto bad;
    kiln_strbuf_printf(b, "=%lld", size);
    p = end;
    SKIP_WS();
  }
  if (b->len == start + strlen("mesh["))
    return SHC_UNIMPL(op,
                      "replica_groups: the mesh %s has no axes (a maximal mesh names one "
                      "device): there is nothing to group over",
                      t);
  kiln_strbuf_append_char(b, ']');
  p++;
  SKIP_WS();
  if (*p == ',') {
    p++;
    SKIP_WS();
    if (strncmp(p, "device_ids", 10) != 0) goto bad;
    p += 10;
    SKIP_WS();
    if (*p++ != '=') goto bad;
    SKIP_WS();
    if (*p++ != '[') goto bad;
    kiln_strbuf_append(b, ", device_ids=(");
    for (int k = 0;; k++) {
      SKIP_WS();
      if (*p == ']') break;
      if (k && *p++ != ',') goto bad;
      char *end;
      long long id = strtoll(p, &end, 10);
      if (end == p) goto bad;
      kiln_strbuf_printf(b, "%s%lld", k ? "," : "", id);
      p = end;
    }
    kiln_strbuf_append_char(b, ')');
    p++;
    SKIP_WS();
  }
#undef SKIP_WS
  if (*p == '>') return NULL;
bad:
  return SHC_UNIMPL(op,
                    "replica_groups: the mesh %s is not of the form <[\"axis\"=N, ...], "
                    "device_ids=[...]>",
                    t);
}

/* The number of devices of the mesh whose text follows `mesh<` at `p` (["x"=2, "y"=4], ...>:
 * 8; no axes, a maximal mesh: 1), or -1 when it is not of that form. */
static int64_t sdy_mesh_devices(const char *p) {
  int64_t n = 1;
  while (isspace((unsigned char)*p)) p++;
  if (*p++ != '[') return -1;
  for (;;) {
    while (isspace((unsigned char)*p) || *p == ',') p++;
    if (*p == ']') return n;
    if (*p++ != '"') return -1;
    while (*p && *p != '"') p++;
    if (*p++ != '"') return -1;
    while (isspace((unsigned char)*p)) p++;
    if (*p++ != '=') return -1;
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 1 || n > (INT64_C(1) << 24) / v) return -1;
    n *= v;
    p = end;
  }
}

/* Refuses (UNIMPLEMENTED naming it) a mesh of more than one device in the text `t` of `what`
 * (every `mesh<...>` in it: an sdy.mesh, or a mesh inlined in a sharding). */
static kiln_status one_device_meshes(const kiln_mlir_op_t *op, const char *what, const char *t) {
  for (const char *m = strstr(t, "mesh<"); m; m = strstr(m + 5, "mesh<")) {
    int64_t n = sdy_mesh_devices(m + 5);
    if (n == 1) continue;
    if (n < 0) return SHC_UNIMPL(op, "%s %s is not a mesh kiln reads", what, t);
    return SHC_UNIMPL(op,
                      "a shard_map over a mesh of %" PRId64
                      " devices (%s): its body runs on each device's shard, and the program "
                      "around it must then be partitioned over the mesh (SPMD partitioning), "
                      "which kiln does not do; a program for one device (meshes of one device) "
                      "converts",
                      n, what);
  }
  return NULL;
}

/* Refuses a value of type `whole` whose shard inside sdy.manual_computation has another type
 * (`what` i: "operand" or "result"). */
static kiln_status shard_is_whole(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *what,
                                  int32_t i, const kiln_mlir_type_t *whole,
                                  const kiln_mlir_type_t *shard) {
  const char *w, *sh;
  SHC_TRY(shc_type_text(c, whole, &w));
  SHC_TRY(shc_type_text(c, shard, &sh));
  if (strcmp(w, sh) == 0) return NULL;
  return SHC_UNIMPL(op,
                    "%s %d is %s but its shard is %s (split over a mesh of more than one "
                    "device: SPMD partitioning, which kiln does not do)",
                    what, (int)i, w, sh);
}

/* sdy.manual_computation (jax.shard_map under Shardy): its body runs on each device's shard of
 * the operands, in_shardings / out_shardings saying how the values split over the manual mesh
 * axes. Over meshes of one device — a program compiled for one device, which is all kiln's
 * converter sees without SPMD partitioning — every shard is the whole value and the body's
 * collectives have one participant: the body is the computation, inlined. Checked: every
 * sdy.mesh of the module and every mesh written in the op's attributes has one device (the
 * bytecode reader does not keep the op's own attributes: there the module's meshes decide,
 * and one must exist), and the body's arguments and results have the operands' and results'
 * types (a shard of another shape means a larger mesh). */
kiln_status shc_convert_manual_computation(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  int32_t meshes = 0;
  for (int32_t i = 0; i < c->m->body.num_ops; i++) {
    const kiln_mlir_op_t *o = c->m->body.ops[i];
    if (strcmp(o->name, "sdy.mesh") != 0) continue;
    const kiln_mlir_attr_t *def = kiln_mlir_op_attr(o, "mesh");
    if (!def || def->kind != KILN_MLIR_ATTR_OTHER || !def->str ||
        strncmp(def->str, "#sdy.mesh<", 10) != 0)
      return SHC_UNIMPL(op, "an sdy.mesh of the module is not in its text form (#sdy.mesh<...>)");
    SHC_TRY(one_device_meshes(op, "sdy.mesh", def->str));
    meshes++;
  }
  for (int32_t i = 0; i < op->num_attrs; i++) {
    const kiln_mlir_attr_t *a = op->attrs[i].value;
    if (a && a->kind == KILN_MLIR_ATTR_OTHER && a->str)
      SHC_TRY(one_device_meshes(op, op->attrs[i].name, a->str));
  }
  if (!meshes)
    return SHC_UNIMPL(op,
                      "in a module without an sdy.mesh: kiln cannot tell that its mesh has "
                      "one device");
  if (op->num_regions != 1 || op->regions[0].num_blocks != 1)
    return SHC_INVALID(op, "takes one region of one block");
  const kiln_mlir_block_t *b = &op->regions[0].blocks[0];
  if (b->num_args != op->num_operands)
    return SHC_INVALID(op, "its body takes %d arguments for %d operands", (int)b->num_args,
                       (int)op->num_operands);
  const kiln_mlir_op_t *last = b->num_ops ? b->ops[b->num_ops - 1] : NULL;
  if (!last || strcmp(last->name, "sdy.return") != 0)
    return SHC_INVALID(op, "its body does not end in sdy.return");
  if (last->num_operands != op->num_results)
    return SHC_INVALID(op, "its body returns %d values for %d results", (int)last->num_operands,
                       (int)op->num_results);
  for (int32_t i = 0; i < op->num_operands; i++)
    if (!op->operands[i] || !op->operands[i]->type || !b->args[i].type)
      return SHC_INVALID(op, "operand %d or its body's argument is missing or untyped", (int)i);
  for (int32_t i = 0; i < last->num_operands; i++)
    if (!last->operands[i] || !last->operands[i]->type || !op->results[i].type)
      return SHC_INVALID(op, "result %d or the value sdy.return gives for it is missing or untyped",
                         (int)i);
  if (++c->depth > SHC_MAX_DEPTH) return SHC_INVALID(op, "regions nested too deeply");
  for (int32_t i = 0; i < b->num_args; i++) {
    const char *v;
    SHC_TRY(shard_is_whole(c, op, "operand", i, op->operands[i]->type, b->args[i].type));
    SHC_TRY(shc_lookup(c, op->operands[i], &v));
    shc_bind(c, &b->args[i], v);
  }
  /* The body's ops but its sdy.return (a terminator only here, not for shc_convert_block). */
  for (int32_t i = 0; i + 1 < b->num_ops; i++)
    KILN_RETURN_IF_ERROR(shc_convert_op(c, b->ops[i]), "in sdy.manual_computation at line %d",
                         (int)op->line);
  for (int32_t i = 0; i < op->num_results; i++) {
    const char *v;
    SHC_TRY(shard_is_whole(c, op, "result", i, op->results[i].type, last->operands[i]->type));
    KILN_RETURN_IF_ERROR(shc_lookup(c, last->operands[i], &v), "sdy.return operand %d", (int)i);
    shc_bind(c, &op->results[i], v);
  }
  c->depth--;
  return NULL;
}

/* #stablehlo.replica_group_mesh_axes<mesh = @m or #stablehlo.mesh<...>, axes = [...]> as HLO's
 * text: mesh['x'=2,'y'=4][, device_ids=(...)] {'x':(1)2,'y'}. A symbol names a top-level
 * sdy.mesh. */
static kiln_status mesh_axes_groups(shc_ctx_t *c, const kiln_mlir_op_t *op,
                                    const kiln_mlir_attr_t *a, kiln_strbuf_t *b) {
  const kiln_mlir_attr_t *mesh = kiln_mlir_attr_field(a, "mesh");
  const kiln_mlir_attr_t *axes = kiln_mlir_attr_field(a, "axes");
  bool none = axes && axes->kind == KILN_MLIR_ATTR_DENSE_ARRAY && axes->num_elements == 0; /* [] */
  if (!axes || (axes->kind != KILN_MLIR_ATTR_ARRAY && !none))
    return SHC_INVALID(op, "replica_groups: mesh axes without an axes list");
  if (mesh && mesh->kind == KILN_MLIR_ATTR_SYMBOL_REF) {
    const kiln_mlir_attr_t *def = NULL;
    for (int32_t i = 0; i < c->m->body.num_ops && !def; i++) {
      const kiln_mlir_op_t *o = c->m->body.ops[i];
      const kiln_mlir_attr_t *sym = kiln_mlir_op_attr(o, "sym_name");
      if (!strcmp(o->name, "sdy.mesh") && sym && sym->kind == KILN_MLIR_ATTR_STRING &&
          sym->str_len == strlen(mesh->str) && !memcmp(sym->str, mesh->str, sym->str_len))
        def = kiln_mlir_op_attr(o, "mesh");
    }
    if (!def)
      return SHC_INVALID(op, "replica_groups: mesh @%s is not defined (no sdy.mesh @%s)", mesh->str,
                         mesh->str);
    if (def->kind != KILN_MLIR_ATTR_OTHER || !def->str || strncmp(def->str, "#sdy.mesh<", 10))
      return SHC_UNIMPL(op, "replica_groups: mesh @%s is not in sdy.mesh's text form", mesh->str);
    SHC_TRY(sdy_mesh_text(op, def->str, b));
  } else if (is_struct(mesh, "stablehlo.mesh")) {
    const kiln_mlir_attr_t *maxes = kiln_mlir_attr_field(mesh, "axes");
    if (!maxes || maxes->kind != KILN_MLIR_ATTR_ARRAY || maxes->num_elements == 0)
      return SHC_INVALID(op, "replica_groups: a mesh needs a list of axes");
    kiln_strbuf_append(b, "mesh[");
    int64_t devices = 1;
    for (int32_t i = 0; i < maxes->num_elements; i++) {
      const kiln_mlir_attr_t *e = maxes->elements[i];
      const kiln_mlir_attr_t *name = kiln_mlir_attr_field(e, "name");
      const kiln_mlir_attr_t *size = kiln_mlir_attr_field(e, "size");
      if (!is_struct(e, "stablehlo.mesh_axis") || !name || name->kind != KILN_MLIR_ATTR_STRING ||
          !size || size->kind != KILN_MLIR_ATTR_INTEGER)
        return SHC_INVALID(op, "replica_groups: mesh axis %d is not a #stablehlo.mesh_axis", i);
      if (i) kiln_strbuf_append_char(b, ',');
      SHC_TRY(mesh_name(op, name->str, name->str_len, b));
      kiln_strbuf_printf(b, "=%" PRId64, size->i);
      if (size->i < 1 || devices > (INT64_C(1) << 24) / size->i)
        return SHC_INVALID(op,
                           "replica_groups: mesh axis %d has size %" PRId64
                           " (sizes must be positive, at most 2^24 devices in all)",
                           (int)i, size->i);
      devices *= size->i;
    }
    kiln_strbuf_append_char(b, ']');
    int64_t *ids;
    int32_t n;
    SHC_TRY(shc_attr_ints(c, op, kiln_mlir_attr_field(mesh, "device_ids"), "device_ids", &ids, &n));
    if (n && n != devices)
      return SHC_INVALID(op, "replica_groups: the mesh has %" PRId64 " devices, device_ids %d",
                         devices, (int)n);
    if (n) {
      kiln_strbuf_append(b, ", device_ids=(");
      for (int32_t i = 0; i < n; i++) kiln_strbuf_printf(b, "%s%" PRId64, i ? "," : "", ids[i]);
      kiln_strbuf_append_char(b, ')');
    }
  } else {
    return SHC_INVALID(op, "replica_groups: the mesh is neither @name nor #stablehlo.mesh<...>");
  }
  kiln_strbuf_append(b, " {");
  for (int32_t i = 0; i < axes->num_elements; i++) {
    const kiln_mlir_attr_t *e = axes->elements[i], *name = e, *sub = NULL;
    if (is_struct(e, "stablehlo.axis_ref")) {
      name = kiln_mlir_attr_field(e, "name");
      sub = kiln_mlir_attr_field(e, "sub_axis_info");
    }
    if (!name || name->kind != KILN_MLIR_ATTR_STRING)
      return SHC_INVALID(op, "replica_groups: axis %d is neither a name nor an axis_ref", i);
    if (i) kiln_strbuf_append_char(b, ',');
    SHC_TRY(mesh_name(op, name->str, name->str_len, b));
    if (sub) {
      const kiln_mlir_attr_t *pre = kiln_mlir_attr_field(sub, "pre_size");
      const kiln_mlir_attr_t *size = kiln_mlir_attr_field(sub, "size");
      if (!is_struct(sub, "stablehlo.sub_axis_info") || !pre ||
          pre->kind != KILN_MLIR_ATTR_INTEGER || !size || size->kind != KILN_MLIR_ATTR_INTEGER)
        return SHC_INVALID(op, "replica_groups: axis %d's sub_axis_info is not (pre-size)size",
                           (int)i);
      kiln_strbuf_printf(b, ":(%" PRId64 ")%" PRId64, pre->i, size->i);
    }
  }
  kiln_strbuf_append_char(b, '}');
  return NULL;
}

/* "{{0,1},{2,3}}": the rows of 2-D dense elements attribute `a` (-1 pads uneven rows), for
 * each of `copies` copies c the ids shifted by c * stride. */
static void append_groups(kiln_strbuf_t *b, const kiln_mlir_attr_t *a, int64_t copies,
                          int64_t stride) {
  int64_t rows = a->type->dims[0], cols = a->type->dims[1];
  kiln_strbuf_append_char(b, '{');
  for (int64_t copy = 0; copy < copies; copy++)
    for (int64_t r = 0; r < rows; r++) {
      kiln_strbuf_printf(b, "%s{", copy || r ? "," : "");
      bool first = true;
      for (int64_t k = 0; k < cols; k++) {
        int64_t v = kiln_literal_get_s64(a->literal, r * cols + k);
        if (v < 0) continue;
        kiln_strbuf_printf(b, "%s%" PRId64, first ? "" : ",", copy * stride + v);
        first = false;
      }
      kiln_strbuf_append_char(b, '}');
    }
  kiln_strbuf_append_char(b, '}');
}

/* replica_groups={{0,1},{2,3}} from a 2-D dense elements attribute; mesh axes as HLO's mesh
 * form. */
static kiln_status replica_groups(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *name,
                                  const char **out) {
  const kiln_mlir_attr_t *a = kiln_mlir_op_attr(op, name);
  *out = "";
  if (!a) return NULL;
  if (is_struct(a, "stablehlo.replica_group_mesh_axes") && !strcmp(name, "replica_groups")) {
    kiln_strbuf_t b = {0};
    kiln_strbuf_append(&b, ", replica_groups=");
    kiln_status s = mesh_axes_groups(c, op, a, &b);
    if (!s) *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
    return s;
  }
  if (a->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || !a->literal || !a->type ||
      a->type->kind != KILN_MLIR_TYPE_TENSOR || a->type->rank != 2)
    return SHC_INVALID(op, "%s: expected a 2-D tensor of integers", name);
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, ", %s=", !strcmp(name, "source_target_pairs") ? name : "replica_groups");
  append_groups(&b, a, 1, 0);
  *out = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  return NULL;
}

static const char *channel_text(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  int64_t id = shc_channel_id(op);
  if (id <= 0) return "";
  return kiln_arena_printf(&c->arena, ", channel_id=%" PRId64, id);
}

/* An integer module attribute ("mhlo.num_replicas"), or `dflt`. */
static int64_t module_int_attr(shc_ctx_t *c, const char *name, int64_t dflt) {
  for (int32_t i = 0; i < c->m->num_attrs; i++)
    if (!strcmp(c->m->attrs[i].name, name)) return shc_attr_int(c->m->attrs[i].value, dflt);
  return dflt;
}

/* collective_reduce: an all-reduce of the data operands, kept on each group's root (its first
 * process, or group[root[j]] with has_dynamic_root) and zeros elsewhere. The root test compares
 * replica-id (partition-id when channel_id > 0) with each group's members. */
static kiln_status convert_collective_reduce(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_attr_t *a = kiln_mlir_op_attr(op, "replica_groups");
  if (a && is_struct(a, "stablehlo.replica_group_mesh_axes"))
    return SHC_UNIMPL(op, "mesh-axes replica_groups (give explicit groups)");
  if (!a || a->kind != KILN_MLIR_ATTR_DENSE_ELEMENTS || !a->literal || !a->type ||
      a->type->kind != KILN_MLIR_TYPE_TENSOR || a->type->rank != 2)
    return SHC_INVALID(op, "replica_groups: expected a 2-D tensor of integers");
  if (op->num_regions != 1) return SHC_INVALID(op, "expected a reduction body");
  bool dynamic = shc_attr_int(kiln_mlir_op_attr(op, "has_dynamic_root"), 0) != 0;
  int32_t nd = op->num_results;
  if (op->num_operands != nd + (dynamic ? 1 : 0))
    return SHC_INVALID(op, "expected %d data operands%s", (int)nd,
                       dynamic ? " and a root operand" : "");
  const char *sh, *ops, *rg, *body, *root = NULL;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, nd, &ops));
  SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &body));
  if (dynamic) SHC_TRY(shc_lookup(c, op->operands[nd], &root));
  int64_t rows = a->type->dims[0], cols = a->type->dims[1];
  bool by_partition = shc_channel_id(op) > 0;
  if (!by_partition) {
    SHC_TRY(replica_groups(c, op, "replica_groups", &rg));
  } else {
    /* HLO's all-reduce has no cross-partition mode: the groups of every replica, in
     * flattened ids (replica * num_partitions + partition) */
    int64_t nr = module_int_attr(c, "mhlo.num_replicas", 1);
    int64_t np = module_int_attr(c, "mhlo.num_partitions", 0);
    if (nr > 1 && np < 1)
      return SHC_UNIMPL(op,
                        "cross-partition groups of %" PRId64
                        " replicas need the module's mhlo.num_partitions",
                        nr);
    kiln_strbuf_t b = {0};
    kiln_strbuf_append(&b, ", replica_groups=");
    append_groups(&b, a, nr, np);
    kiln_strbuf_printf(&b, ", channel_id=%" PRId64 ", use_global_device_ids=true",
                       shc_channel_id(op));
    rg = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
  }
  const char *sum = shc_emit(c, sh, "all-reduce(%s)%s, to_apply=%s", ops, rg, body);
  const char *id = shc_emit(c, "u32[]", "%s()", by_partition ? "partition-id" : "replica-id");
  id = shc_emit(c, "s64[]", "convert(%s)", id);
  /* pos: this process's index in its group, -1 outside every group */
  const char *pos = shc_emit(c, "s64[]", "constant(-1)");
  for (int64_t r = 0; r < rows; r++) {
    int64_t at = 0;
    for (int64_t k = 0; k < cols; k++) {
      int64_t v = kiln_literal_get_s64(a->literal, r * cols + k);
      if (v < 0) continue;
      const char *m = shc_emit(c, "s64[]", "constant(%" PRId64 ")", v);
      const char *eq = shc_emit(c, "pred[]", "compare(%s, %s), direction=EQ", id, m);
      pos = shc_emit(c, "s64[]", "select(%s, %s, %s)", eq,
                     shc_emit(c, "s64[]", "constant(%" PRId64 ")", at++), pos);
    }
  }
  for (int32_t j = 0; j < nd; j++) {
    const kiln_mlir_type_t *rt = op->results[j].type;
    const char *rsh, *z, *want;
    SHC_TRY(shc_type_text(c, rt, &rsh));
    if (dynamic) {
      const kiln_mlir_type_t *roott = op->operands[nd]->type;
      const char *re;
      SHC_TRY(shc_elem_text(shc_elem_type(roott), &re));
      const char *r1 = shc_emit(c, kiln_arena_printf(&c->arena, "%s[1]", re),
                                "slice(%s), slice={[%d:%d]}", root, (int)j, (int)j + 1);
      want = shc_emit(c, "s64[]", "convert(%s)",
                      shc_emit(c, kiln_arena_printf(&c->arena, "%s[]", re), "reshape(%s)", r1));
    } else {
      want = shc_emit(c, "s64[]", "constant(0)");
    }
    const char *eq = shc_emit(c, "pred[]", "compare(%s, %s), direction=EQ", pos, want);
    const char *in = shc_emit(c, "pred[]", "compare(%s, %s), direction=GE", pos,
                              shc_emit(c, "s64[]", "constant(0)"));
    eq = shc_emit(c, "pred[]", "and(%s, %s)", eq, in);
    SHC_TRY(shc_scalar_const(c, shc_elem_type(rt), 0, &z));
    int32_t rank = rt->kind == KILN_MLIR_TYPE_TENSOR ? rt->rank : 0;
    z = shc_broadcast_scalar(c, z, rsh, rank);
    const char *v =
        nd == 1 ? sum : shc_emit(c, rsh, "get-tuple-element(%s), index=%d", sum, (int)j);
    shc_bind(c, &op->results[j],
             shc_emit(c, rsh, "select(%s, %s, %s)",
                      shc_broadcast_scalar(c, eq, shc_pred_shape_text(c, rt), rank), v, z));
  }
  return NULL;
}

static kiln_status convert_collective(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *n,
                                      bool *handled) {
  const char *sh, *ops, *rg, *body = NULL;
  *handled = true;
  if (!strcmp(n, "all_reduce") || !strcmp(n, "reduce_scatter")) {
    SHC_TRY(results_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    SHC_TRY(replica_groups(c, op, "replica_groups", &rg));
    SHC_TRY(shc_region_computation(c, op, &op->regions[0], false, &body));
    const char *extra = "";
    if (!strcmp(n, "reduce_scatter"))
      extra = kiln_arena_printf(&c->arena, ", dimensions={%" PRId64 "}",
                                shc_attr_int(kiln_mlir_op_attr(op, "scatter_dimension"), 0));
    return bind_results(c, op,
                        shc_emit(c, sh, "%s(%s)%s%s%s%s, to_apply=%s",
                                 !strcmp(n, "all_reduce") ? "all-reduce" : "reduce-scatter", ops,
                                 rg, channel_text(c, op), extra,
                                 shc_attr_int(kiln_mlir_op_attr(op, "use_global_device_ids"), 0)
                                     ? ", use_global_device_ids=true"
                                     : "",
                                 body));
  }
  if (!strcmp(n, "all_gather")) {
    SHC_TRY(results_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    SHC_TRY(replica_groups(c, op, "replica_groups", &rg));
    return bind_results(
        c, op,
        shc_emit(c, sh, "all-gather(%s), dimensions={%" PRId64 "}%s%s%s", ops,
                 shc_attr_int(kiln_mlir_op_attr(op, "all_gather_dim"), 0), rg, channel_text(c, op),
                 shc_attr_int(kiln_mlir_op_attr(op, "use_global_device_ids"), 0)
                     ? ", use_global_device_ids=true"
                     : ""));
  }
  if (!strcmp(n, "all_to_all")) {
    int64_t sd = shc_attr_int(kiln_mlir_op_attr(op, "split_dimension"), 0);
    int64_t cd = shc_attr_int(kiln_mlir_op_attr(op, "concat_dimension"), 0);
    if (sd != cd)
      return SHC_UNIMPL(op, "split_dimension %" PRId64 " != concat_dimension %" PRId64, sd, cd);
    SHC_TRY(results_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    SHC_TRY(replica_groups(c, op, "replica_groups", &rg));
    return bind_results(c, op,
                        shc_emit(c, sh, "all-to-all(%s), dimensions={%" PRId64 "}%s%s", ops, sd, rg,
                                 channel_text(c, op)));
  }
  if (!strcmp(n, "collective_permute")) {
    SHC_TRY(results_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    SHC_TRY(replica_groups(c, op, "source_target_pairs", &rg));
    return bind_results(
        c, op, shc_emit(c, sh, "collective-permute(%s)%s%s", ops, rg, channel_text(c, op)));
  }
  if (!strcmp(n, "collective_broadcast")) {
    SHC_TRY(results_shape(c, op, &sh));
    SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
    SHC_TRY(replica_groups(c, op, "replica_groups", &rg));
    return bind_results(
        c, op, shc_emit(c, sh, "collective-broadcast(%s)%s%s", ops, rg, channel_text(c, op)));
  }
  if (!strcmp(n, "collective_reduce")) return convert_collective_reduce(c, op);
  *handled = false;
  return NULL;
}

static const char *kApiVersionNames[] = {
    "API_VERSION_UNSPECIFIED", "API_VERSION_ORIGINAL", "API_VERSION_STATUS_RETURNING",
    "API_VERSION_STATUS_RETURNING_UNIFIED", "API_VERSION_TYPED_FFI"};

static void escape_into(kiln_strbuf_t *b, const char *s, size_t n) {
  kiln_strbuf_append_char(b, '"');
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)s[i];
    if (ch == '"' || ch == '\\')
      kiln_strbuf_printf(b, "\\%c", ch);
    else if (ch < 32 || ch >= 127)
      kiln_strbuf_printf(b, "\\x%02x", ch);
    else
      kiln_strbuf_append_char(b, (char)ch);
  }
  kiln_strbuf_append_char(b, '"');
}

/* MLIR attribute text of a typed-FFI backend_config dictionary's values (what XLA keeps as
 * the custom call's `backend_config={...}`). */
static kiln_status dict_value_text(const kiln_mlir_op_t *op, kiln_strbuf_t *b,
                                   const kiln_mlir_attr_t *a, int depth) {
  if (depth > 32) return SHC_UNIMPL(op, "backend_config nested too deeply");
  switch (a->kind) {
    case KILN_MLIR_ATTR_UNIT:
      kiln_strbuf_append(b, "unit");
      return NULL;
    case KILN_MLIR_ATTR_BOOL:
      kiln_strbuf_append(b, a->b ? "true" : "false");
      return NULL;
    case KILN_MLIR_ATTR_INTEGER:
      kiln_strbuf_printf(b, "%" PRId64, a->i);
      if (a->type && a->type->kind == KILN_MLIR_TYPE_INTEGER)
        kiln_strbuf_printf(b, " : %si%d", a->type->signedness == KILN_MLIR_UNSIGNED ? "u" : "",
                           (int)a->type->width);
      return NULL;
    case KILN_MLIR_ATTR_FLOAT:
      kiln_strbuf_printf(b, "%.17g", a->f);
      if (a->type && a->type->kind == KILN_MLIR_TYPE_FLOAT)
        kiln_strbuf_printf(b, " : %s", kiln_elem_type_name(a->type->elem));
      return NULL;
    case KILN_MLIR_ATTR_STRING:
      escape_into(b, a->str, a->str_len);
      return NULL;
    case KILN_MLIR_ATTR_ARRAY:
      kiln_strbuf_append_char(b, '[');
      for (int32_t i = 0; i < a->num_elements; i++) {
        if (i) kiln_strbuf_append(b, ", ");
        SHC_TRY(dict_value_text(op, b, a->elements[i], depth + 1));
      }
      kiln_strbuf_append_char(b, ']');
      return NULL;
    case KILN_MLIR_ATTR_DENSE_ARRAY:
      if (a->type && a->type->kind == KILN_MLIR_TYPE_FLOAT)
        kiln_strbuf_printf(b, "array<%s", kiln_elem_type_name(a->type->elem));
      else
        kiln_strbuf_printf(b, "array<i%d", a->type ? (int)a->type->width : 64);
      for (int32_t i = 0; i < a->num_elements; i++) {
        if (a->ints)
          kiln_strbuf_printf(b, "%s%" PRId64, i ? ", " : ": ", a->ints[i]);
        else
          kiln_strbuf_printf(b, "%s%.17g", i ? ", " : ": ", a->floats[i]);
      }
      kiln_strbuf_append_char(b, '>');
      return NULL;
    case KILN_MLIR_ATTR_DICTIONARY:
      kiln_strbuf_append_char(b, '{');
      for (int32_t i = 0; i < a->num_elements; i++) {
        kiln_strbuf_printf(b, "%s%s = ", i ? ", " : "", a->fields[i].name);
        SHC_TRY(dict_value_text(op, b, a->fields[i].value, depth + 1));
      }
      kiln_strbuf_append_char(b, '}');
      return NULL;
    default:
      return SHC_UNIMPL(op, "a backend_config value of attribute kind %d", (int)a->kind);
  }
}

/* The shape text of value type `t` with minor-to-major `m2m` (n of them; scalars as they are). */
static kiln_status with_layout(shc_ctx_t *c, const kiln_mlir_type_t *t, const int64_t *m2m,
                               int32_t n, const char **out) {
  const char *base;
  SHC_TRY(shc_type_text(c, t, &base));
  int32_t rank = t->kind == KILN_MLIR_TYPE_TENSOR ? t->rank : 0;
  if (rank == 0 || n != rank) {
    *out = base;
    return NULL;
  }
  *out = kiln_arena_printf(&c->arena, "%s%s", base, shc_ints_text(c, m2m, n));
  return NULL;
}

/* A custom call's operand_layouts / result_layouts (minor-to-major per value, as jaxlib's
 * column-major LAPACK calls and jax.ffi.ffi_call's input_layouts write them): the result
 * shape text with its layouts (*sh) and HLO's operand_layout_constraints (*constraints; NULL
 * when the call has none). Both or neither, as XLA requires. */
static kiln_status custom_call_layouts(shc_ctx_t *c, const kiln_mlir_op_t *op, const char **sh,
                                       const char **constraints) {
  const kiln_mlir_attr_t *ol = kiln_mlir_op_attr(op, "operand_layouts");
  const kiln_mlir_attr_t *rl = kiln_mlir_op_attr(op, "result_layouts");
  if (!ol || !rl || ol->kind != KILN_MLIR_ATTR_ARRAY || rl->kind != KILN_MLIR_ATTR_ARRAY)
    return NULL;
  if (ol->num_elements != op->num_operands || rl->num_elements != op->num_results)
    return SHC_INVALID(op,
                       "operand_layouts / result_layouts name %d / %d layouts for %d "
                       "operands and %d results",
                       (int)ol->num_elements, (int)rl->num_elements, (int)op->num_operands,
                       (int)op->num_results);
  for (int32_t pass = 0; pass < 2; pass++) {
    const kiln_mlir_attr_t *l = pass ? rl : ol;
    kiln_strbuf_t b = {0};
    kiln_strbuf_append_char(&b, pass ? '(' : '{');
    for (int32_t i = 0; i < l->num_elements; i++) {
      int64_t *m2m;
      int32_t n;
      const char *one;
      kiln_status s = shc_attr_ints(c, op, l->elements[i],
                                    pass ? "result_layouts" : "operand_layouts", &m2m, &n);
      if (!s) s = with_layout(c, pass ? op->results[i].type : op->operands[i]->type, m2m, n, &one);
      if (s) {
        kiln_strbuf_free(&b);
        return s;
      }
      kiln_strbuf_printf(&b, "%s%s", i ? ", " : "", one);
    }
    kiln_strbuf_append_char(&b, pass ? ')' : '}');
    const char *text = kiln_arena_strdup(&c->arena, kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
    if (!pass)
      *constraints = text;
    else if (op->num_results == 1) /* no tuple: the one shape without the parentheses */
      *sh = kiln_arena_printf(&c->arena, "%.*s", (int)strlen(text) - 2, text + 1);
    else
      *sh = text;
  }
  return NULL;
}

static kiln_status convert_custom_call(shc_ctx_t *c, const kiln_mlir_op_t *op) {
  const kiln_mlir_attr_t *t = kiln_mlir_op_attr(op, "call_target_name");
  if (!t || !t->str) return SHC_INVALID(op, "no call_target_name");
  const char *sh, *ops, *constraints = NULL;
  if (op->num_results == 1)
    SHC_TRY(shc_type_text(c, op->results[0].type, &sh));
  else
    SHC_TRY(shc_results_tuple_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  SHC_TRY(custom_call_layouts(c, op, &sh, &constraints));
  kiln_strbuf_t b = {0};
  kiln_strbuf_printf(&b, "custom-call(%s), custom_call_target=", ops);
  escape_into(&b, t->str, t->str_len ? t->str_len : strlen(t->str));
  int64_t api = shc_attr_int(kiln_mlir_op_attr(op, "api_version"), 1);
  const char *apie = shc_attr_enum(kiln_mlir_op_attr(op, "api_version"));
  if (apie) {
    for (int i = 0; i < 5; i++)
      if (strstr(kApiVersionNames[i], apie) || strstr(apie, kApiVersionNames[i] + 12)) api = i;
  }
  if (api < 0 || api > 4) api = 1;
  /* JAX keeps a typed-FFI call's attributes in the discardable `mhlo.backend_config`
   * dictionary (its `backend_config` the empty string; jax.ffi.ffi_call, jaxlib's lapack_*_ffi):
   * as XLA reads it, the dictionary is the call's backend_config and the call is typed FFI. */
  const kiln_mlir_attr_t *bc = kiln_mlir_op_attr(op, "backend_config");
  const kiln_mlir_attr_t *mbc = kiln_mlir_op_attr(op, "mhlo.backend_config");
  if (mbc && mbc->kind == KILN_MLIR_ATTR_DICTIONARY &&
      (!bc || (bc->kind == KILN_MLIR_ATTR_STRING && !bc->str_len))) {
    bc = mbc;
    api = 4;
  }
  kiln_strbuf_printf(&b, ", api_version=%s", kApiVersionNames[api]);
  if (shc_attr_int(kiln_mlir_op_attr(op, "has_side_effect"), 0))
    kiln_strbuf_append(&b, ", custom_call_has_side_effect=true");
  if (bc && bc->kind == KILN_MLIR_ATTR_STRING && bc->str_len) {
    kiln_strbuf_append(&b, ", backend_config=");
    escape_into(&b, bc->str, bc->str_len);
  } else if (bc && bc->kind == KILN_MLIR_ATTR_DICTIONARY && bc->num_elements > 0) {
    kiln_strbuf_append(&b, ", backend_config=");
    kiln_status s = dict_value_text(op, &b, bc, 0);
    if (s) {
      kiln_strbuf_free(&b);
      return s;
    }
  }
  const kiln_mlir_attr_t *cc = kiln_mlir_op_attr(op, "called_computations");
  if (cc && cc->kind == KILN_MLIR_ATTR_ARRAY && cc->num_elements > 0) {
    kiln_strbuf_free(&b);
    return SHC_UNIMPL(op,
                      "called_computations (the callee would need converting into a "
                      "computation)");
  }
  const kiln_mlir_attr_t *al = kiln_mlir_op_attr(op, "output_operand_aliases");
  if (al && al->kind == KILN_MLIR_ATTR_ARRAY && al->num_elements > 0) {
    kiln_strbuf_append(&b, ", output_to_operand_aliasing={");
    for (int32_t i = 0; i < al->num_elements; i++) {
      const kiln_mlir_attr_t *e = al->elements[i];
      int64_t *oti, *opi;
      int32_t no, np;
      kiln_status s = shc_attr_ints(c, op, kiln_mlir_attr_field(e, "output_tuple_indices"),
                                    "output_tuple_indices", &oti, &no);
      if (!s)
        s = shc_attr_ints(c, op, kiln_mlir_attr_field(e, "operand_tuple_indices"),
                          "operand_tuple_indices", &opi, &np);
      if (s) {
        kiln_strbuf_free(&b);
        return s;
      }
      kiln_strbuf_printf(&b, "%s%s: (%" PRId64 ", %s)", i ? ", " : "", shc_ints_text(c, oti, no),
                         shc_attr_int(kiln_mlir_attr_field(e, "operand_index"), 0),
                         shc_ints_text(c, opi, np));
    }
    kiln_strbuf_append_char(&b, '}');
  }
  if (constraints) kiln_strbuf_printf(&b, ", operand_layout_constraints=%s", constraints);
  const char *v = shc_emit(c, op->num_results == 0 ? "()" : sh, "%s", kiln_strbuf_cstr(&b));
  kiln_strbuf_free(&b);
  if (op->num_results == 0) return NULL;
  return bind_results(c, op, v);
}

/* The shortest decimal that reads back as the same f32 (epsilon is an f32 attribute: text and
 * bytecode readers hand it over as the decimal or as the f32 value). */
static const char *f32_text(shc_ctx_t *c, double v) {
  float f = (float)v;
  char buf[64];
  for (int p = 1; p <= 9; p++) {
    snprintf(buf, sizeof buf, "%.*g", p, (double)f);
    if (strtof(buf, NULL) == f) break;
  }
  return kiln_arena_strdup(&c->arena, buf);
}

static kiln_status convert_batch_norm(shc_ctx_t *c, const kiln_mlir_op_t *op, const char *hlo) {
  const char *sh, *ops;
  SHC_TRY(results_shape(c, op, &sh));
  SHC_TRY(shc_operand_list(c, op, 0, op->num_operands, &ops));
  const kiln_mlir_attr_t *eps = kiln_mlir_op_attr(op, "epsilon");
  return bind_results(c, op,
                      shc_emit(c, sh, "%s(%s), epsilon=%s, feature_index=%" PRId64, hlo, ops,
                               f32_text(c, eps ? eps->f : 0.001),
                               shc_attr_int(kiln_mlir_op_attr(op, "feature_index"), 0)));
}

kiln_status shc_convert_complex_op(shc_ctx_t *c, const kiln_mlir_op_t *op, bool *handled) {
  *handled = false;
  if (strncmp(op->name, "stablehlo.", 10) != 0) return NULL;
  const char *n = op->name + 10;
  *handled = true;
  if (!strcmp(n, "reduce")) return convert_reduce(c, op);
  if (!strcmp(n, "reduce_window")) return convert_reduce_window(c, op);
  if (!strcmp(n, "select_and_scatter")) return convert_select_and_scatter(c, op);
  if (!strcmp(n, "sort")) return convert_sort(c, op);
  if (!strcmp(n, "map")) return convert_map(c, op);
  if (!strcmp(n, "gather")) return convert_gather(c, op, false);
  if (!strcmp(n, "dynamic_gather")) return convert_gather(c, op, true);
  if (!strcmp(n, "scatter")) return convert_scatter(c, op);
  if (!strcmp(n, "convolution") || !strcmp(n, "dynamic_conv")) return convert_convolution(c, op);
  if (!strcmp(n, "custom_call")) return convert_custom_call(c, op);
  if (!strcmp(n, "batch_norm_inference")) return convert_batch_norm(c, op, "batch-norm-inference");
  if (!strcmp(n, "batch_norm_training")) return convert_batch_norm(c, op, "batch-norm-training");
  if (!strcmp(n, "batch_norm_grad")) return convert_batch_norm(c, op, "batch-norm-grad");
  kiln_status s = convert_collective(c, op, n, handled);
  if (s || *handled) return s;
  *handled = false;
  return NULL;
}
