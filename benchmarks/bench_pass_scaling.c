/* Pass scaling: whether every pass of the pipeline costs time linear in the module.
 *
 * Builds modules of 1, 2, 4 ... 64 copies of a transformer layer (pre-norm attention with 4
 * heads and a GELU MLP, f32, 128 tokens of width 128; each layer its own weights, the layers
 * chained), runs the whole pipeline on each (best of a few runs, kiln_pass_options_t.timings
 * collecting each pass's CPU time, steadier than wall time on a shared machine) and prints
 * each pass's time per instruction of the input.
 * The baseline is the 1-layer module measured in the same run: column "ratio" is the
 * 64-layer time per instruction over the 1-layer one (flat = 1.0; the goal is <= 1.5);
 * "vs 8" divides by the 8-layer module instead (a pass that does nothing on one layer,
 * e.g. multi-output fusion finding no siblings, shows there as growth that is not scaling).
 *   bench_pass_scaling [--max-layers=N] [--reps=N] [--print-module=N] [--all]
 * --all prints every pass (the default leaves out those under 0.05 us per instruction at both
 * ends) with three decimals (ns). A pass that cheap is mostly the pass manager's two clock
 * reads around it, so its ratio says little.
 * --print-module=N prints the N-layer module's text and exits (to feed kiln-opt). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/str.h"
#include "compiler/hlo/ir.h"
#include "compiler/passes/pass.h"
#include "compiler/passes/pipeline.h"
#include "tools/common/hlo_file.h"

#define MAX_SIZES 8

/* One layer; "@" stands for the layer number, "$" for the previous layer's output. */
static const char kLayer[] =
    "  w_qkv.@ = f32[128,384] parameter(P0)\n"
    "  w_o.@ = f32[128,128] parameter(P1)\n"
    "  w_up.@ = f32[128,512] parameter(P2)\n"
    "  w_down.@ = f32[512,128] parameter(P3)\n"
    "  gamma.@ = f32[128] parameter(P4)\n"
    /* layer norm 1 */
    "  sum1.@ = f32[128] reduce($, zero), dimensions={1}, to_apply=add\n"
    "  mean1.@ = f32[128] divide(sum1.@, width_v)\n"
    "  meanb1.@ = f32[128,128] broadcast(mean1.@), dimensions={0}\n"
    "  cen1.@ = f32[128,128] subtract($, meanb1.@)\n"
    "  sq1.@ = f32[128,128] multiply(cen1.@, cen1.@)\n"
    "  var1.@ = f32[128] reduce(sq1.@, zero), dimensions={1}, to_apply=add\n"
    "  varm1.@ = f32[128] divide(var1.@, width_v)\n"
    "  vare1.@ = f32[128] add(varm1.@, eps_v)\n"
    "  rs1.@ = f32[128] rsqrt(vare1.@)\n"
    "  rsb1.@ = f32[128,128] broadcast(rs1.@), dimensions={0}\n"
    "  gb1.@ = f32[128,128] broadcast(gamma.@), dimensions={1}\n"
    "  nrm1.@ = f32[128,128] multiply(cen1.@, rsb1.@)\n"
    "  ln1.@ = f32[128,128] multiply(nrm1.@, gb1.@)\n"
    /* attention */
    "  qkv.@ = f32[128,384] dot(ln1.@, w_qkv.@), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={0}\n"
    "  q.@ = f32[128,128] slice(qkv.@), slice={[0:128], [0:128]}\n"
    "  k.@ = f32[128,128] slice(qkv.@), slice={[0:128], [128:256]}\n"
    "  v.@ = f32[128,128] slice(qkv.@), slice={[0:128], [256:384]}\n"
    "  q3.@ = f32[128,4,32] reshape(q.@)\n"
    "  k3.@ = f32[128,4,32] reshape(k.@)\n"
    "  v3.@ = f32[128,4,32] reshape(v.@)\n"
    "  qt.@ = f32[4,128,32] transpose(q3.@), dimensions={1,0,2}\n"
    "  kt.@ = f32[4,128,32] transpose(k3.@), dimensions={1,0,2}\n"
    "  vt.@ = f32[4,128,32] transpose(v3.@), dimensions={1,0,2}\n"
    "  s.@ = f32[4,128,128] dot(qt.@, kt.@), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
    "rhs_batch_dims={0}, rhs_contracting_dims={2}\n"
    "  scale.@ = f32[4,128,128] broadcast(inv_sqrt_dh), dimensions={}\n"
    "  ss.@ = f32[4,128,128] multiply(s.@, scale.@)\n"
    "  mx.@ = f32[4,128] reduce(ss.@, ninf), dimensions={2}, to_apply=max\n"
    "  mxb.@ = f32[4,128,128] broadcast(mx.@), dimensions={0,1}\n"
    "  sh.@ = f32[4,128,128] subtract(ss.@, mxb.@)\n"
    "  ex.@ = f32[4,128,128] exponential(sh.@)\n"
    "  den.@ = f32[4,128] reduce(ex.@, zero), dimensions={2}, to_apply=add\n"
    "  denb.@ = f32[4,128,128] broadcast(den.@), dimensions={0,1}\n"
    "  p.@ = f32[4,128,128] divide(ex.@, denb.@)\n"
    "  ctx.@ = f32[4,128,32] dot(p.@, vt.@), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
    "rhs_batch_dims={0}, rhs_contracting_dims={1}\n"
    "  ctxt.@ = f32[128,4,32] transpose(ctx.@), dimensions={1,0,2}\n"
    "  ctx2.@ = f32[128,128] reshape(ctxt.@)\n"
    "  att.@ = f32[128,128] dot(ctx2.@, w_o.@), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={0}\n"
    "  res1.@ = f32[128,128] add($, att.@)\n"
    /* layer norm 2 (no scale) */
    "  sum2.@ = f32[128] reduce(res1.@, zero), dimensions={1}, to_apply=add\n"
    "  mean2.@ = f32[128] divide(sum2.@, width_v)\n"
    "  meanb2.@ = f32[128,128] broadcast(mean2.@), dimensions={0}\n"
    "  cen2.@ = f32[128,128] subtract(res1.@, meanb2.@)\n"
    "  sq2.@ = f32[128,128] multiply(cen2.@, cen2.@)\n"
    "  var2.@ = f32[128] reduce(sq2.@, zero), dimensions={1}, to_apply=add\n"
    "  varm2.@ = f32[128] divide(var2.@, width_v)\n"
    "  vare2.@ = f32[128] add(varm2.@, eps_v)\n"
    "  rs2.@ = f32[128] rsqrt(vare2.@)\n"
    "  rsb2.@ = f32[128,128] broadcast(rs2.@), dimensions={0}\n"
    "  ln2.@ = f32[128,128] multiply(cen2.@, rsb2.@)\n"
    /* MLP with tanh GELU */
    "  up.@ = f32[128,512] dot(ln2.@, w_up.@), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={0}\n"
    "  cube.@ = f32[128,512] multiply(up.@, up.@)\n"
    "  cube2.@ = f32[128,512] multiply(cube.@, up.@)\n"
    "  c044.@ = f32[128,512] broadcast(k044), dimensions={}\n"
    "  t1.@ = f32[128,512] multiply(cube2.@, c044.@)\n"
    "  t2.@ = f32[128,512] add(up.@, t1.@)\n"
    "  c079.@ = f32[128,512] broadcast(k079), dimensions={}\n"
    "  t3.@ = f32[128,512] multiply(t2.@, c079.@)\n"
    "  th.@ = f32[128,512] tanh(t3.@)\n"
    "  one.@ = f32[128,512] broadcast(kone), dimensions={}\n"
    "  t4.@ = f32[128,512] add(th.@, one.@)\n"
    "  half.@ = f32[128,512] broadcast(khalf), dimensions={}\n"
    "  t5.@ = f32[128,512] multiply(up.@, half.@)\n"
    "  gelu.@ = f32[128,512] multiply(t5.@, t4.@)\n"
    "  down.@ = f32[128,128] dot(gelu.@, w_down.@), lhs_contracting_dims={1}, "
    "rhs_contracting_dims={0}\n"
    "  out.@ = f32[128,128] add(res1.@, down.@)\n";
#define PARAMS_PER_LAYER 5

/* Appends the layer template for layer `i` (parameters numbered from `first_param`). */
static void append_layer(kiln_strbuf_t *b, int i, int first_param) {
  char prev[32];
  if (i == 0)
    snprintf(prev, sizeof prev, "x");
  else
    snprintf(prev, sizeof prev, "out.%d", i - 1);
  for (const char *p = kLayer; *p; p++) {
    if (*p == '@') {
      kiln_strbuf_printf(b, "%d", i);
    } else if (*p == '$') {
      kiln_strbuf_append(b, prev);
    } else if (*p == 'P' && p[1] >= '0' && p[1] <= '9' && p[-1] == '(') {
      kiln_strbuf_printf(b, "%d", first_param + (p[1] - '0'));
      p++;
    } else {
      kiln_strbuf_printf(b, "%c", *p);
    }
  }
}

static void build_module_text(kiln_strbuf_t *b, int layers) {
  kiln_strbuf_printf(b, "HloModule layers_%d\n\n", layers);
  kiln_strbuf_append(b,
                     "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                     "  ROOT r = f32[] add(a, b)\n}\n\n"
                     "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n"
                     "  ROOT r = f32[] maximum(a, b)\n}\n\n"
                     "ENTRY main {\n  x = f32[128,128] parameter(0)\n"
                     "  zero = f32[] constant(0)\n  ninf = f32[] constant(-inf)\n"
                     "  width = f32[] constant(128)\n"
                     "  width_v = f32[128] broadcast(width), dimensions={}\n"
                     "  eps = f32[] constant(1e-5)\n"
                     "  eps_v = f32[128] broadcast(eps), dimensions={}\n"
                     "  inv_sqrt_dh = f32[] constant(0.17677669)\n"
                     "  k044 = f32[] constant(0.044715)\n  k079 = f32[] constant(0.7978846)\n"
                     "  kone = f32[] constant(1)\n  khalf = f32[] constant(0.5)\n");
  for (int i = 0; i < layers; i++) append_layer(b, i, 1 + i * PARAMS_PER_LAYER);
  kiln_strbuf_printf(b, "  ROOT result = f32[128,128] copy(out.%d)\n}\n", layers - 1);
}

/* Runs the pipeline `reps` times on fresh parses of `text`; keeps each pass's best time. */
static int run_pipeline(const char *text, int reps, kiln_pass_timings_t *best,
                        int64_t *out_instrs) {
  memset(best, 0, sizeof *best);
  for (int r = 0; r < reps; r++) {
    kiln_hlo_module_t *m = NULL;
    kiln_hlo_parse_options_t po = {.filename = "bench_pass_scaling"};
    kiln_status s = kiln_hlo_parse_module(text, strlen(text), &po, &m);
    if (s) {
      kiln_status_report(s, "bench_pass_scaling");
      return 1;
    }
    *out_instrs = kiln_hlo_module_instruction_count(m);
    kiln_pass_timings_t t = {0};
    kiln_pass_options_t o = {.verify = 0, .timings = &t};
    s = kiln_pipeline_run(m, &o);
    kiln_hlo_module_destroy(m);
    if (s) {
      kiln_status_report(s, "bench_pass_scaling");
      return 1;
    }
    for (int i = 0; i < t.num_entries; i++) {
      int j = 0;
      while (j < best->num_entries && strcmp(best->entries[j].name, t.entries[i].name)) j++;
      if (j == best->num_entries)
        best->entries[best->num_entries++] = t.entries[i];
      else if (t.entries[i].cpu_seconds < best->entries[j].cpu_seconds)
        best->entries[j] = t.entries[i];
    }
  }
  return 0;
}

static double pass_seconds(const kiln_pass_timings_t *t, const char *name) {
  for (int i = 0; i < t->num_entries; i++)
    if (!strcmp(t->entries[i].name, name)) return t->entries[i].cpu_seconds;
  return 0;
}

static double total_seconds(const kiln_pass_timings_t *t) {
  double s = 0;
  for (int i = 0; i < t->num_entries; i++) s += t->entries[i].cpu_seconds;
  return s;
}

int main(int argc, char **argv) {
  int max_layers = 64, reps = 5, print_module = 0;
  bool all = false;
  for (int i = 1; i < argc; i++) {
    if (!strncmp(argv[i], "--max-layers=", 13))
      max_layers = atoi(argv[i] + 13);
    else if (!strncmp(argv[i], "--reps=", 7))
      reps = atoi(argv[i] + 7);
    else if (!strncmp(argv[i], "--print-module=", 15))
      print_module = atoi(argv[i] + 15);
    else if (!strcmp(argv[i], "--all"))
      all = true;
    else {
      fprintf(stderr,
              "usage: bench_pass_scaling [--max-layers=N] [--reps=N] [--print-module=N] [--all]\n");
      return 2;
    }
  }
  if (print_module > 0) {
    kiln_strbuf_t b = {0};
    build_module_text(&b, print_module);
    fputs(kiln_strbuf_cstr(&b), stdout);
    kiln_strbuf_free(&b);
    return 0;
  }
  if (max_layers < 1 || reps < 1) {
    fprintf(stderr, "bench_pass_scaling: --max-layers and --reps must be at least 1\n");
    return 2;
  }
  kiln_pass_timings_t timings[MAX_SIZES];
  int64_t instrs[MAX_SIZES];
  int layers[MAX_SIZES], n = 0;
  for (int l = 1; l <= max_layers && n < MAX_SIZES; l *= 2) {
    kiln_strbuf_t b = {0};
    build_module_text(&b, l);
    /* Fewer repetitions for the big modules: their time is long enough to be stable. */
    int r = l >= 32 && reps > 1 ? reps - 1 : reps;
    int rc = run_pipeline(kiln_strbuf_cstr(&b), r, &timings[n], &instrs[n]);
    kiln_strbuf_free(&b);
    if (rc) return rc;
    layers[n++] = l;
  }
  printf(
      "pass time per input instruction (us), pipeline on N transformer layers; last column:\n"
      "largest module over the 1-layer module (1.0 = linear; goal <= 1.5)\n");
  printf("%-28s", "layers");
  for (int i = 0; i < n; i++) printf(" %8d", layers[i]);
  printf(" %8s %8s\n%-28s", "ratio", "vs 8", "instructions");
  for (int i = 0; i < n; i++) printf(" %8lld", (long long)instrs[i]);
  printf("\n");
  const kiln_pass_timings_t *last = &timings[n - 1];
  double worst = 0;
  const char *worst_name = "";
  for (int p = 0; p < last->num_entries; p++) {
    const char *name = last->entries[p].name;
    double first = pass_seconds(&timings[0], name) * 1e6 / (double)instrs[0];
    double final = last->entries[p].cpu_seconds * 1e6 / (double)instrs[n - 1];
    if (!all && first < 0.05 && final < 0.05) continue; /* passes that cost nothing here */
    printf("%-28s", name);
    for (int i = 0; i < n; i++)
      printf(all ? " %8.3f" : " %8.2f", pass_seconds(&timings[i], name) * 1e6 / (double)instrs[i]);
    double ratio = first > 0 ? final / first : 0;
    double eight = n > 3 ? pass_seconds(&timings[3], name) * 1e6 / (double)instrs[3] : 0;
    printf(" %7.2fx %7.2fx\n", ratio, eight > 0 ? final / eight : 0);
    /* Only passes that matter (>= 1% of the total) count for the worst ratio. */
    if (last->entries[p].cpu_seconds >= 0.01 * total_seconds(last) && ratio > worst) {
      worst = ratio;
      worst_name = name;
    }
  }
  printf("%-28s", "total");
  for (int i = 0; i < n; i++)
    printf(" %8.2f", total_seconds(&timings[i]) * 1e6 / (double)instrs[i]);
  double t0 = total_seconds(&timings[0]) * 1e6 / (double)instrs[0];
  double t1 = total_seconds(last) * 1e6 / (double)instrs[n - 1];
  double t8 = n > 3 ? total_seconds(&timings[3]) * 1e6 / (double)instrs[3] : 0;
  printf(" %7.2fx %7.2fx\n", t0 > 0 ? t1 / t0 : 0, t8 > 0 ? t1 / t8 : 0);
  printf("worst pass (>= 1%% of the time): %s %.2fx; total %.2fx over %d..%d layers\n", worst_name,
         worst, t0 > 0 ? t1 / t0 : 0, layers[0], layers[n - 1]);
  return 0;
}
