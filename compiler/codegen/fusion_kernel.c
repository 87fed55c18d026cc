/* Kernel scaffolding (see fusion_kernel.h). */
#include "compiler/codegen/fusion_kernel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/clock.h"
#include "compiler/codegen/kir_pipeline.h"

/* ---- options ---- */

bool kiln_codegen_excess_precision(const kiln_codegen_compile_options_t *opts) {
  return !(opts && opts->strict_precision);
}

/* ---- the kernel object ---- */

void kiln_codegen_kernel_mark_identity(kiln_codegen_kernel_t *k, int n,
                                       const kiln_hlo_instruction_t *const *values) {
  if (n <= 0 || k->num_outputs != n) return;
  int *map = kiln_malloc((size_t)n * sizeof *map);
  bool ok = true;
  for (int o = 0; o < n && ok; o++) {
    const kiln_hlo_instruction_t *v = values[o];
    map[o] = -1;
    if (v->opcode == KILN_OP_PARAMETER && kiln_shape_equal(v->shape, k->outputs[o], true))
      for (int j = 0; j < k->num_inputs && map[o] < 0; j++)
        if (k->inputs[j] == v) map[o] = j;
    ok = map[o] >= 0;
  }
  if (ok) {
    k->identity_inputs = map;
  } else {
    kiln_free(map);
  }
}

void kiln_codegen_kernel_free(kiln_codegen_kernel_t *k) {
  if (!k) return;
  kiln_codegen_kernel_t *next = k->next;
  while (next) {
    kiln_codegen_kernel_t *after = next->next;
    next->next = NULL;
    kiln_codegen_kernel_free(next);
    kiln_free(next);
    next = after;
  }
  if (k->kir) kiln_kir_module_destroy(k->kir);
  if (k->ctx) kiln_affine_ctx_destroy(k->ctx);
  kiln_free(k->inputs);
  kiln_free(k->outputs);
  kiln_free(k->scratch);
  kiln_free(k->identity_inputs);
  memset(k, 0, sizeof(*k));
}

kiln_status kiln_codegen_kernel_compile_nvptx(const kiln_codegen_kernel_t *k,
                                              const struct kiln_nvptx_options *opts,
                                              struct kiln_nvptx_result *out) {
  return kiln_kir_compile_nvptx(k->kir, opts, out);
}

static kiln_status ptxas_check_one(const kiln_codegen_kernel_t *k, char **ptx) {
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

kiln_status kiln_codegen_kernel_ptxas_check(const kiln_codegen_kernel_t *k, char **ptx) {
  if (ptx) *ptx = NULL;
  for (const kiln_codegen_kernel_t *x = k; x; x = x->next) {
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

/* ---- names and dumps ---- */

void kiln_codegen_sanitize_name(char *s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9')))
      *s = '_';
}

void kiln_codegen_kernel_name(const kiln_hlo_computation_t *c,
                              const kiln_codegen_compile_options_t *opts, const char *suffix,
                              char *buf, size_t n) {
  if (opts && opts->kernel_name)
    snprintf(buf, n, "%s%s", opts->kernel_name, suffix ? suffix : "");
  else
    snprintf(buf, n, "%s_kernel%s", c->name, suffix ? suffix : "");
  kiln_codegen_sanitize_name(buf);
}

void kiln_codegen_dump_text(const char *dir, const char *name, const char *suffix,
                            const char *text) {
  if (!dir || !*dir) return;
  mkdir(dir, 0777);
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s.%s", dir, name, suffix);
  FILE *fp = fopen(path, "w");
  if (!fp) return;
  fputs(text, fp);
  fclose(fp);
}

void kiln_codegen_dump_fusion(const char *dump_dir, const char *name,
                              const kiln_hlo_computation_t *c,
                              const kiln_hlo_computation_t *reads) {
  if (!dump_dir || !*dump_dir) return;
  kiln_strbuf_t hb = {0};
  kiln_hlo_computation_print(&hb, c);
  if (reads) {
    kiln_strbuf_printf(&hb, "\n// values read by %s:\n", name);
    kiln_hlo_computation_print(&hb, reads);
  }
  kiln_codegen_dump_text(dump_dir, name, "40-hlo-fusion.txt", kiln_strbuf_cstr(&hb));
  kiln_strbuf_free(&hb);
}

void kiln_codegen_dump_partition(const char *dump_dir, const char *name,
                                 const kiln_partition_t *part) {
  if (!dump_dir || !*dump_dir) return;
  kiln_strbuf_t pb = {0};
  kiln_partition_print(part, &pb);
  kiln_codegen_dump_text(dump_dir, name, "41-partition.txt", kiln_strbuf_cstr(&pb));
  kiln_strbuf_free(&pb);
}

/* ---- an emitter's start and end ---- */

const char *kiln_codegen_kernel_start(kiln_codegen_kernel_t *out, const kiln_hlo_computation_t *c,
                                      const kiln_hlo_computation_t *reads,
                                      const kiln_codegen_compile_options_t *opts,
                                      const char *suffix, char *name, size_t n) {
  kiln_codegen_kernel_name(c, opts, suffix, name, n);
  const char *dump_dir = opts ? opts->dump_dir : NULL;
  kiln_codegen_dump_fusion(dump_dir, name, c, reads);
  out->ctx = kiln_affine_ctx_create();
  out->kir = kiln_kir_module_create(name, out->ctx);
  return dump_dir;
}

kiln_status kiln_codegen_kernel_finish(kiln_codegen_kernel_t *out, kiln_status st, double t0,
                                       const char *dump_dir, const char *name,
                                       const kiln_codegen_compile_options_t *opts,
                                       const kiln_hlo_computation_t *c) {
  if (!st) st = kiln_kir_verify(out->kir);
  out->emit_ms = kiln_clock_ms() - t0;
  if (!st) st = kiln_codegen_kernel_run_pipeline(out->kir, dump_dir, name, opts, &out->pipeline_ms);
  if (st) {
    kiln_codegen_kernel_free(out);
    return kiln_status_annotate(st, "while compiling fusion %s", c->name);
  }
  return NULL;
}

kiln_status kiln_codegen_kernel_run_pipeline(kiln_kir_module_t *kir, const char *dump_dir,
                                             const char *name,
                                             const kiln_codegen_compile_options_t *opts,
                                             double *ms) {
  double t0 = kiln_clock_ms();
  kiln_kir_pipeline_options_t po = {0};
  po.dump_dir = dump_dir;
  po.dump_name = name;
  po.no_vectorize = opts && opts->no_vectorize;
  po.unroll_max_trip = opts ? opts->unroll_max_trip : 0;
  kiln_status st = kiln_kir_pipeline_run(kir, &po);
  *ms += kiln_clock_ms() - t0;
  return st;
}
