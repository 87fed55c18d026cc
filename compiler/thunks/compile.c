/* The compile driver (compile.h). */
#include "base/clock.h"
#include "compiler/thunks/compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/disk_cache.h"
#include "base/log.h"
#include "base/str.h"
#include "compiler/codegen/fusion_compiler.h"
#include "compiler/codegen/kir_pipeline.h"
#include "compiler/hlo/opcode.h"
#include "compiler/passes/buffer_assignment.h"
#include "compiler/passes/pipeline.h"
#include "compiler/thunks/executable_cache.h"
#include "runtime/command_buffer_thunk.h"

/* The options with their defaults filled in. Options only: the edges read the environment
 * (plugin/env_options.h). */
static kiln_compile_options_t resolve_options(const kiln_compile_options_t *opts) {
  kiln_compile_options_t o;
  memset(&o, 0, sizeof(o));
  if (opts) o = *opts;
  if (!o.command_buffer_min_run) o.command_buffer_min_run = KILN_COMMAND_BUFFER_DEFAULT_MIN_RUN;
  return o;
}

static void module_adopt_on_unwind(void *m) {
  kiln_hlo_module_oom_adopt(m);
}

static kiln_status run_passes(kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                              kiln_compile_stats_t *stats) {
  if (!m) return KILN_ERR_INVALID("compile: NULL module");
  if (!m->entry) return KILN_ERR_INVALID("compile: module %s has no entry computation", m->name);
  kiln_compile_options_t o = resolve_options(opts);
  /* CUDA's classic cuBLAS takes f32 and f64 only (other dots are compiled as kernels);
   * with cuBLASLt (a target capability in the options) bf16/f16 and epilogues too. */
  kiln_pass_options_t po = {.verify = -1};
  if (o.passes) po = *o.passes;
  if (o.emit.target == KILN_TARGET_CUDA) {
    po.gemm_f32_f64_only = true;
    po.gemm_cublaslt = o.emit.cublaslt;
  }
  double t0 = kiln_clock_ms();
  /* An out-of-memory unwind leaves the module's containers to the module (it can then only
   * be destroyed: the passes may have stopped half way). */
  kiln_oom_cleanup_t unwind;
  kiln_oom_defer(&unwind, module_adopt_on_unwind, m);
  kiln_pipeline_lift_parse_limit(m);
  kiln_status s = kiln_pipeline_run(m, &po);
  kiln_oom_undefer(&unwind);
  KILN_RETURN_IF_ERROR(s, "while compiling %s", m->name);
  /* kiln sorts stably: XLA leaves the order of equal keys of an unstable sort unspecified,
   * and the stable order is one of the allowed ones that also makes every backend (and the
   * evaluator) agree. */
  for (size_t c = 0; c < m->computations.len; c++) {
    kiln_hlo_computation_t *comp = m->computations.data[c];
    for (size_t i = 0; i < comp->instructions.len; i++)
      if (comp->instructions.data[i]->opcode == KILN_OP_SORT)
        comp->instructions.data[i]->is_stable = true;
  }
  if (stats) stats->passes_ms = kiln_clock_ms() - t0;
  return NULL;
}

static bool cache_applies(const kiln_compile_options_t *o);
static kiln_status cache_begin(const kiln_hlo_module_t *m, const kiln_compile_options_t *o,
                               bool optimized, uint64_t key[2], kiln_executable_desc_t **out,
                               kiln_compile_stats_t *st);
static void cache_store(const kiln_compile_options_t *o, const uint64_t key[2],
                        const kiln_executable_desc_t *d);

/* An unwind's cleanup of a description the unwind frees: what it holds outside the scope's
 * record (made held), which nothing else would free. */
static void desc_held_free_on_unwind(void *p) {
  kiln_executable_desc_t *d = p;
  if (d->keepalive_free) d->keepalive_free(d->keepalive);
  d->keepalive = NULL;
  d->keepalive_free = NULL;
  for (int32_t i = 0; i < d->num_owned; i++)
    if (d->owned_free[i]) d->owned_free[i](d->owned[i]);
  d->num_owned = 0;
}

static kiln_status lower_module(const kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                                kiln_executable_desc_t **out, kiln_compile_stats_t *stats) {
  if (out) *out = NULL;
  if (!m || !out) return KILN_ERR_INVALID("compile: NULL module or out");
  if (!m->entry) return KILN_ERR_INVALID("compile: module %s has no entry computation", m->name);
  kiln_compile_options_t o = resolve_options(opts);
  kiln_compile_stats_t local;
  memset(&local, 0, sizeof(local));
  kiln_compile_stats_t *st = stats ? stats : &local;
  const char *dump_dir = o.emit.dump_dir;
  bool cached = cache_applies(&o);
  uint64_t key[2] = {0, 0};
  if (cached) {
    double passes_ms = st->passes_ms;
    KILN_RETURN_IF_ERROR_PLAIN(cache_begin(m, &o, true, key, out, st));
    if (st->executable_cache_hit) {
      st->total_ms += passes_ms;
      return NULL;
    }
  }
  double t0 = kiln_clock_ms();

  kiln_buffer_assignment_t *ba = NULL;
  KILN_RETURN_IF_ERROR(kiln_buffer_assignment_run(m, NULL, &ba), "while compiling %s", m->name);
  st->buffer_assignment_ms = kiln_clock_ms() - t0;
  st->temp_bytes = ba->stats.temp_bytes;
  if (dump_dir && *dump_dir) {
    kiln_strbuf_t b = {0};
    kiln_buffer_assignment_print(&b, ba);
    kiln_codegen_dump_text(dump_dir, m->name, "96-buffer-assignment.txt", kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
  }

  double t2 = kiln_clock_ms();
  kiln_executable_desc_t *d = NULL;
  kiln_status s = kiln_thunk_emit_module(m, ba, &o.emit, &d, &st->emit);
  kiln_buffer_assignment_free(ba);
  st->emit_ms = kiln_clock_ms() - t2;
  if (s) return kiln_status_annotate(s, "while compiling %s", m->name);
  /* From here an unwind frees the description's blocks, but not what it holds that was made
   * held (its JIT and LLVM context, owned objects): the cleanup frees those. (Not the whole
   * description: forming command buffers moves its thunks, which may be in two lists.) */
  kiln_oom_cleanup_t unwind;
  kiln_oom_defer(&unwind, desc_held_free_on_unwind, d);
  if (dump_dir && *dump_dir) {
    kiln_strbuf_t b = {0};
    kiln_executable_desc_print(&b, d);
    kiln_codegen_dump_text(dump_dir, m->name, "97-thunks.txt", kiln_strbuf_cstr(&b));
    kiln_strbuf_free(&b);
  }
  if (!o.no_command_buffers) {
    s = kiln_command_buffer_convert(&d->thunks, o.command_buffer_min_run, &st->command_buffers);
    if (s) {
      kiln_oom_undefer(&unwind);
      kiln_executable_desc_destroy(d);
      return kiln_status_annotate(s, "while forming command buffers for %s", m->name);
    }
    kiln_command_buffer_counts_t cc = {0};
    kiln_command_buffer_count(&d->thunks, &cc);
    st->command_buffer_custom_calls = cc.custom_calls_inside;
    st->split_custom_calls = cc.custom_calls_outside;
    if (dump_dir && *dump_dir) {
      kiln_strbuf_t b = {0};
      kiln_executable_desc_print(&b, d);
      kiln_codegen_dump_text(dump_dir, m->name, "98-command-buffers.txt", kiln_strbuf_cstr(&b));
      kiln_strbuf_free(&b);
    }
  }
  if (cached) {
    double t1 = kiln_clock_ms();
    cache_store(&o, key, d);
    st->cache_ms += kiln_clock_ms() - t1;
  }
  kiln_oom_undefer(&unwind);
  st->total_ms = st->passes_ms + (kiln_clock_ms() - t0);
  *out = d;
  return NULL;
}

/* Whether the whole-executable cache applies to a compile with `o`. */
static bool cache_applies(const kiln_compile_options_t *o) {
  if (!o->executable_cache_dir || !*o->executable_cache_dir) return false;
  if (o->emit.dump_dir && *o->emit.dump_dir) return false;
  const kiln_pass_options_t *p = o->passes;
  return !(p && (p->after_pass || p->timings || p->log_changes || (p->dump_dir && *p->dump_dir)));
}

/* Looks `key` up; true with *out on a hit that reads back. */
static bool cache_lookup(const kiln_compile_options_t *o, const uint64_t key[2],
                         kiln_executable_desc_t **out, kiln_compile_stats_t *st) {
  void *data = NULL;
  size_t len = 0;
  double t0 = kiln_clock_ms();
  bool found =
      kiln_disk_cache_get(o->executable_cache_dir, KILN_EXECUTABLE_CACHE_KIND, key, &data, &len);
  double t1 = kiln_clock_ms();
  st->cache_read_ms = t1 - t0;
  if (!found) return false;
  kiln_status s = kiln_executable_desc_from_bytes(data, len, &o->emit, out);
  kiln_free(data);
  st->cache_load_ms = kiln_clock_ms() - t1;
  if (!s) return true;
  KILN_LOG_W("executable cache entry not used, compiling: %s", kiln_status_message(s));
  kiln_status_free(s);
  return false;
}

/* Stores `d` as `key`'s entry; an executable that cannot be serialized is not stored. */
static void cache_store(const kiln_compile_options_t *o, const uint64_t key[2],
                        const kiln_executable_desc_t *d) {
  void *data = NULL;
  size_t len = 0;
  kiln_status s = kiln_executable_desc_to_bytes(d, &data, &len);
  if (s) {
    KILN_LOG_D("executable %s not cached: %s", d->name, kiln_status_message(s));
    kiln_status_free(s);
    return;
  }
  kiln_disk_cache_put(o->executable_cache_dir, KILN_EXECUTABLE_CACHE_KIND, key, data, len);
  kiln_free(data);
}

/* Looks the executable of `m` up (when the cache applies): true on a hit, *out set. */
static kiln_status cache_begin(const kiln_hlo_module_t *m, const kiln_compile_options_t *o,
                               bool optimized, uint64_t key[2], kiln_executable_desc_t **out,
                               kiln_compile_stats_t *st) {
  double t0 = kiln_clock_ms();
  KILN_RETURN_IF_ERROR_PLAIN(kiln_executable_cache_key(m, o, optimized, key));
  st->cache_key_ms = kiln_clock_ms() - t0;
  st->executable_cache_hit = cache_lookup(o, key, out, st);
  st->cache_ms = kiln_clock_ms() - t0;
  if (st->executable_cache_hit) st->total_ms = st->cache_ms;
  return NULL;
}

static kiln_status compile_module(kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                                  kiln_executable_desc_t **out, kiln_compile_stats_t *stats) {
  if (out) *out = NULL;
  if (!m || !out) return KILN_ERR_INVALID("compile: NULL module or out");
  kiln_compile_stats_t local;
  kiln_compile_stats_t *st = stats ? stats : &local;
  memset(st, 0, sizeof(*st));
  /* The environment is read once, here, for both steps. */
  kiln_compile_options_t o = resolve_options(opts);
  bool cached = cache_applies(&o) && m->entry;
  uint64_t key[2] = {0, 0};
  if (cached) {
    KILN_RETURN_IF_ERROR_PLAIN(cache_begin(m, &o, false, key, out, st));
    if (st->executable_cache_hit) return NULL;
  }
  kiln_compile_options_t lower = o; /* the second step does not look up again */
  lower.executable_cache_dir = NULL;
  /* The passes' changes stay the module's through an unwind of either step. */
  kiln_oom_cleanup_t unwind;
  kiln_oom_defer(&unwind, module_adopt_on_unwind, m);
  kiln_status s = kiln_compile_module_passes(m, &o, st);
  if (!s) s = kiln_compile_optimized_module(m, &lower, out, st);
  kiln_oom_undefer(&unwind);
  KILN_RETURN_IF_ERROR_PLAIN(s);
  if (cached) {
    double t0 = kiln_clock_ms();
    cache_store(&o, key, *out);
    st->cache_ms += kiln_clock_ms() - t0;
  }
  return NULL;
}

/* The entry points: every allocation of a compile may fail (base/alloc.h, out-of-memory
 * scopes), but those of LLVM's object-code generation and of the JIT link (held there:
 * LLVM's own allocations abort on exhaustion). After an unwind `m` may be partly rewritten by
 * the passes: it can only be destroyed, as after any error of the passes. */
kiln_status kiln_compile_module_passes(kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                                       kiln_compile_stats_t *stats) {
  KILN_OOM_SCOPED_RETURN(run_passes(m, opts, stats), (void)0, "running the passes on %s",
                         m ? m->name : "a module");
}

kiln_status kiln_compile_optimized_module(const kiln_hlo_module_t *m,
                                          const kiln_compile_options_t *opts,
                                          kiln_executable_desc_t **out,
                                          kiln_compile_stats_t *stats) {
  KILN_OOM_SCOPED_RETURN(lower_module(m, opts, out, stats), if (out) *out = NULL, "compiling %s",
                         m ? m->name : "a module");
}

kiln_status kiln_compile_module(kiln_hlo_module_t *m, const kiln_compile_options_t *opts,
                                kiln_executable_desc_t **out, kiln_compile_stats_t *stats) {
  KILN_OOM_SCOPED_RETURN(compile_module(m, opts, out, stats), if (out) *out = NULL, "compiling %s",
                         m ? m->name : "a module");
}
