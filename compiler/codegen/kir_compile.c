/* The kernels of one executable compiled together (kir_pipeline.h, "compiling several
 * kernels"): canonical keys, deduplication, the per-kernel cache and parallel LLVM work. */
#include <stdio.h>
#include <string.h>

#include <llvm-c/Core.h>

#include "base/alloc.h"
#include "base/clock.h"
#include "base/hash.h"
#include "base/hashmap.h"
#include "base/host_pool.h"
#include "base/str.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/backend/llvm_init.h"
#include "compiler/codegen/kir_pipeline.h"

/* ---- keys ---- */

/* The content key of `m`: a hash of its canonical text (kiln_kir_print_canonical), so
 * identical kernels of differently named fusions share a key. */
static void kernel_key(const kiln_kir_module_t *m, uint64_t key[2]) {
  kiln_strbuf_t text = {0};
  kiln_kir_print_canonical(m, &text);
  kiln_hasher_t h;
  kiln_hash_init(&h, 0x6b69722d6b6579ull);
  kiln_hash_field(&h, text.data ? text.data : "", text.len);
  kiln_hash_final(&h, key);
  kiln_strbuf_free(&text);
}

/* The symbol a key's kernel is compiled under: "kiln_" and the key in hex. */
static void key_symbol(const uint64_t key[2], char out[64]) {
  char hex[33];
  kiln_hash_hex(key, hex);
  snprintf(out, 64, "kiln_%s", hex);
}

void kiln_kir_kernel_symbol(const kiln_kir_module_t *m, char out[64]) {
  uint64_t key[2];
  kernel_key(m, key);
  key_symbol(key, out);
}

/* The cache key of content key `content` compiled for `target`. */
static void cache_key(const uint64_t content[2], const char *target, uint64_t key[2]) {
  kiln_hasher_t h;
  kiln_kernel_cache_key_begin(&h);
  kiln_hash_field(&h, target, strlen(target));
  kiln_hash_word(&h, content[0]);
  kiln_hash_word(&h, content[1]);
  kiln_hash_final(&h, key);
}

/* Renames the kernel function of lowered module `mod` (named `from`) to `to`. */
static kiln_status rename_kernel(LLVMModuleRef mod, const char *from, const char *to) {
  LLVMValueRef f = LLVMGetNamedFunction(mod, from);
  if (!f) return KILN_ERR_INTERNAL("lowered module has no function %s", from);
  LLVMSetValueName2(f, to, strlen(to));
  return NULL;
}

/* ---- the batch: unique kernels, cache lookups, parallel jobs ---- */

typedef struct job {
  const kiln_kir_module_t *kir; /* the first module with this content */
  uint64_t content[2], key[2];  /* content key; cache key (content + target) */
  char symbol[64];
  void *image; /* compiled code (owned) */
  size_t size;
  bool cached;        /* from the kernel cache */
  bool from_disk;     /* ... its disk level */
  bool cacheable;     /* a result worth storing */
  bool small;         /* host: compiled on the small tier (kiln_kir_host_small_kernel) */
  LLVMContextRef ctx; /* a miss's own context and module */
  LLVMModuleRef mod;
  kiln_status status;
  /* the target's work: host or NVPTX */
  kiln_host_jit_t *jit;
  const kiln_nvptx_options_t *nvptx;
} job_t;

typedef struct batch {
  size_t n;
  int *unique_of; /* per module: its job */
  job_t *jobs;
  size_t num_jobs;
} batch_t;

static void batch_free(batch_t *b) {
  for (size_t j = 0; j < b->num_jobs; j++) {
    job_t *x = &b->jobs[j];
    if (x->mod) LLVMDisposeModule(x->mod);
    if (x->ctx) LLVMContextDispose(x->ctx);
    kiln_free(x->image);
    kiln_status_free(x->status);
  }
  kiln_free(b->jobs);
  kiln_free(b->unique_of);
}

/* What an out-of-memory unwind (base/alloc.h) frees of a batch in progress: LLVM's contexts,
 * the workers' objects and the NVPTX target machine. */
typedef struct batch_unwind {
  kiln_oom_cleanup_t cleanup;
  batch_t *b;
  LLVMTargetMachineRef tm;
} batch_unwind_t;

static void batch_free_on_unwind(void *arg) {
  batch_unwind_t *u = arg;
  batch_free(u->b);
  if (u->tm) LLVMDisposeTargetMachine(u->tm);
}

/* Keys every module, keeps one job per distinct key, looks each job up in the cache. */
static void batch_plan(batch_t *b, const kiln_kir_module_t *const *mods, size_t n,
                       const char *target, const char *cache_dir, const char *kind, bool lookup,
                       kiln_kir_batch_stats_t *st) {
  b->n = n;
  b->unique_of = kiln_calloc(n + 1, sizeof(int));
  b->jobs = kiln_calloc(n + 1, sizeof(job_t));
  for (size_t i = 0; i < n; i++) {
    uint64_t content[2];
    kernel_key(mods[i], content);
    size_t j = 0;
    while (j < b->num_jobs &&
           (b->jobs[j].content[0] != content[0] || b->jobs[j].content[1] != content[1]))
      j++;
    b->unique_of[i] = (int)j;
    if (j < b->num_jobs) continue;
    job_t *x = &b->jobs[b->num_jobs++];
    x->kir = mods[i];
    x->content[0] = content[0];
    x->content[1] = content[1];
    cache_key(content, target, x->key);
    key_symbol(content, x->symbol);
    x->cached = lookup &&
                kiln_kernel_cache_get(cache_dir, kind, x->key, &x->image, &x->size, &x->from_disk);
    if (x->cached) {
      if (x->from_disk)
        st->disk_hits++;
      else
        st->memory_hits++;
    }
  }
  st->kernels += (int)n;
  st->unique += (int)b->num_jobs;
}

/* Whether region `r` (its ops, the regions nested in them and the functions they call) holds a
 * loop or a shared tile. Only the ops the kernel still has: a module also keeps the regions of
 * ops that passes replaced (kir.h). `seen`: functions already looked at, each once. */
static bool region_has_loop(const kiln_kir_region_t *r, kiln_ptrmap_t *seen) {
  if (!r) return false;
  for (size_t i = 0; i < r->ops.len; i++) {
    const kiln_kir_op_t *op = r->ops.data[i];
    if (op->opcode == KILN_KIR_FOR || op->opcode == KILN_KIR_LOOP ||
        op->opcode == KILN_KIR_ALLOC_SHARED)
      return true;
    for (uint32_t j = 0; j < op->num_regions; j++)
      if (region_has_loop(op->regions[j], seen)) return true;
    if (op->opcode == KILN_KIR_CALL && op->callee && !kiln_ptrmap_get(seen, op->callee)) {
      kiln_ptrmap_put(seen, op->callee, (void *)1);
      if (region_has_loop(op->callee->body, seen)) return true;
    }
  }
  return false;
}

bool kiln_kir_host_small_kernel(const kiln_kir_module_t *m) {
  const kiln_kir_func_t *f = kiln_kir_module_kernel(m);
  if (!f) return false;
  /* Loops (reductions' accumulators, which O3's unrolling keeps in registers) and shared
   * tiles keep the full tier whatever the size. */
  kiln_ptrmap_t seen;
  kiln_ptrmap_init(&seen);
  const bool loop = region_has_loop(f->body, &seen);
  kiln_ptrmap_free(&seen);
  if (loop) return false;
  double work = 1;
  for (int d = 0; d < 3; d++)
    work *= (double)(f->block[d] > 0 ? f->block[d] : 1) * (double)(f->grid[d] > 0 ? f->grid[d] : 1);
  return work <= KILN_HOST_SMALL_KERNEL_WORK;
}

/* Object-code generation is LLVM's (its own allocations abort on exhaustion): kiln's
 * allocations here do not unwind an out-of-memory scope (base/alloc.h); on the pool's workers
 * they are outside any scope anyway. */
static void job_run(job_t *x) {
  kiln_oom_hold();
  if (x->jit) {
    LLVMModuleRef mod = x->mod;
    x->mod = NULL; /* compile_object consumes it */
    x->status =
        x->small
            ? kiln_host_jit_compile_small_object(x->jit, mod, x->kir->name, &x->image, &x->size)
            : kiln_host_jit_compile_object(x->jit, mod, x->kir->name, &x->image, &x->size);
    x->cacheable = !x->status;
  } else {
    kiln_nvptx_options_t o = *x->nvptx;
    o.dump_name = x->kir->name;
    kiln_nvptx_result_t r;
    x->status = kiln_nvptx_compile(x->mod, &o, &r);
    if (!x->status && r.cubin) {
      x->image = r.cubin;
      x->size = r.cubin_size;
      r.cubin = NULL;
      x->cacheable = true;
    } else if (!x->status && r.ptx) { /* no cubin tool: the driver takes the PTX */
      x->size = strlen(r.ptx) + 1;
      x->image = kiln_strdup(r.ptx);
    } else if (!x->status) {
      x->status = KILN_ERR_INTERNAL("%s: no cubin or PTX produced", x->kir->name);
    }
    kiln_nvptx_result_free(&r);
  }
  if (x->mod) LLVMDisposeModule(x->mod);
  x->mod = NULL;
  LLVMContextDispose(x->ctx);
  x->ctx = NULL;
  kiln_oom_release();
}

static void run_jobs(void **args, int64_t begin, int64_t end) {
  job_t **jobs = (job_t **)args;
  for (int64_t i = begin; i < end; i++) job_run(jobs[i]);
}

/* Lowers every miss (serially: a kernel's lowering uses its affine context) into a context
 * of its own, then compiles the misses on a pool of workers. */
static kiln_status batch_compile(batch_t *b, const kiln_kir_batch_options_t *o,
                                 kiln_kir_batch_stats_t *st, LLVMTargetMachineRef nvptx_tm) {
  job_t **pending = kiln_calloc(b->num_jobs + 1, sizeof(job_t *));
  size_t nt = 0;
  kiln_status s = NULL;
  double t0 = kiln_clock_ms();
  for (size_t j = 0; j < b->num_jobs && !s; j++) {
    job_t *x = &b->jobs[j];
    if (x->cached) continue;
    x->ctx = LLVMContextCreate();
    s = x->jit ? kiln_kir_lower_host_for(x->kir, x->ctx, kiln_host_jit_features(x->jit), &x->mod)
               : kiln_kir_lower_nvptx(x->kir, x->ctx, nvptx_tm, &x->mod);
    const kiln_kir_func_t *k = kiln_kir_module_kernel(x->kir);
    if (!s) s = rename_kernel(x->mod, k->name, x->symbol);
    if (s) s = kiln_status_annotate(s, "lowering %s", x->kir->name);
    pending[nt++] = x;
  }
  st->lower_ms += kiln_clock_ms() - t0;
  if (s) {
    kiln_free(pending);
    return s;
  }
  double t1 = kiln_clock_ms();
  kiln_host_pool_t *pool = NULL;
  if (nt > 1 && o->num_threads != 1) {
    kiln_status ps = kiln_host_pool_create(o->num_threads, &pool);
    if (ps) { /* no threads to be had: compile on this one */
      kiln_status_free(ps);
      pool = NULL;
    }
  }
  /* LLVM's lazy globals made on one thread first, for each tier the batch uses, whoever
   * compiles next (host_jit.h); a batch compiled on this thread alone makes them itself (a
   * warm-up is a whole pipeline and code generation run of an empty module) */
  if (pool && pending[0]->jit) {
    bool tiers[2] = {false, false}; /* full, small */
    for (size_t i = 0; i < nt; i++) tiers[pending[i]->small] = true;
    kiln_host_jit_prepare_threads(pending[0]->jit, tiers[0], tiers[1]);
  }
  st->threads = pool ? kiln_host_pool_num_workers(pool) : 1;
  s = kiln_host_pool_launch(pool, run_jobs, (void **)pending, (int64_t)nt, 1);
  kiln_host_pool_destroy(pool);
  st->compile_ms += kiln_clock_ms() - t1;
  st->compiled += (int)nt;
  for (size_t i = 0; i < nt; i++) st->small_tier += pending[i]->small;
  for (size_t i = 0; i < nt && !s; i++) {
    job_t *x = pending[i];
    if (x->status) {
      s = kiln_status_annotate(x->status, "compiling %s", x->kir->name);
      x->status = NULL;
    }
  }
  for (size_t i = 0; i < nt && !s; i++)
    if (pending[i]->cacheable)
      kiln_kernel_cache_put(o->cache_dir,
                            pending[i]->jit ? KILN_KERNEL_CACHE_HOST : KILN_KERNEL_CACHE_CUDA,
                            pending[i]->key, pending[i]->image, pending[i]->size);
  kiln_free(pending);
  return s;
}

kiln_status kiln_kir_compile_host_batch(const kiln_kir_module_t *const *mods, size_t n,
                                        kiln_host_jit_t *jit, const kiln_kir_batch_options_t *opts,
                                        kiln_kir_host_kernel_t *out,
                                        kiln_kir_batch_stats_t *stats) {
  kiln_kir_batch_stats_t local;
  kiln_kir_batch_stats_t *st = stats ? stats : &local;
  memset(st, 0, sizeof(*st));
  if (n == 0) return NULL;
  memset(out, 0, n * sizeof(*out));
  if (!mods || !jit || !out) return KILN_ERR_INVALID("kir compile host: NULL argument");
  kiln_kir_batch_options_t o = {0};
  if (opts) o = *opts;
  for (size_t i = 0; i < n; i++) {
    const kiln_kir_func_t *k = mods[i] ? kiln_kir_module_kernel(mods[i]) : NULL;
    if (!k) return KILN_ERR_INVALID("kir compile host: module %zu has no kernel", i);
    if (strlen(k->name) >= sizeof(out[i].name))
      return KILN_ERR_INVALID("kir compile host: kernel name %s too long", k->name);
  }
  kiln_strbuf_t target = {0};
  kiln_strbuf_printf(&target, "host|%s|%s|%s|%s%s", kiln_host_jit_triple(jit),
                     kiln_host_jit_cpu(jit), kiln_host_jit_features(jit),
                     kiln_host_jit_pipeline(jit),
                     kiln_host_jit_small_tier(jit) ? "|small-tier" : "");
  batch_t b;
  memset(&b, 0, sizeof(b));
  batch_unwind_t unwind = {.b = &b};
  kiln_oom_defer(&unwind.cleanup, batch_free_on_unwind, &unwind);
  /* With dumps asked for, every kernel is compiled (a cached one would write none). */
  batch_plan(&b, mods, n, kiln_strbuf_cstr(&target), o.cache_dir, KILN_KERNEL_CACHE_HOST,
             !kiln_host_jit_dump_dir(jit), st);
  kiln_strbuf_free(&target);
  for (size_t j = 0; j < b.num_jobs; j++) {
    b.jobs[j].jit = jit;
    b.jobs[j].small = kiln_host_jit_small_tier(jit) && kiln_kir_host_small_kernel(b.jobs[j].kir);
  }
  for (size_t i = 0; i < n; i++) st->small_tier_kernels += b.jobs[b.unique_of[i]].small;
  kiln_status s = batch_compile(&b, &o, st, NULL);
  double t0 = kiln_clock_ms();
  void **addr = kiln_calloc(b.num_jobs + 1, sizeof(void *));
  if (!s) {
    const void **objs = kiln_calloc(b.num_jobs + 1, sizeof(void *));
    size_t *sizes = kiln_calloc(b.num_jobs + 1, sizeof(size_t));
    const char **syms = kiln_calloc(b.num_jobs + 1, sizeof(char *));
    for (size_t j = 0; j < b.num_jobs; j++) {
      objs[j] = b.jobs[j].image;
      sizes[j] = b.jobs[j].size;
      syms[j] = b.jobs[j].symbol;
    }
    kiln_oom_hold(); /* the JIT's link is kiln's loader or LLVM's ORC: whole or not at all */
    s = kiln_host_jit_link(jit, objs, sizes, syms, (int)b.num_jobs, addr);
    kiln_oom_release();
    kiln_free(objs);
    kiln_free(sizes);
    kiln_free(syms);
  }
  for (size_t i = 0; i < n && !s; i++) {
    const kiln_kir_func_t *k = kiln_kir_module_kernel(mods[i]);
    out[i].fn = (kiln_host_kernel_fn)addr[b.unique_of[i]];
    out[i].num_blocks = k->grid[0] * k->grid[1] * k->grid[2];
    out[i].num_params = kiln_kir_func_num_params(k);
    snprintf(out[i].name, sizeof(out[i].name), "%s", k->name);
    snprintf(out[i].symbol, sizeof(out[i].symbol), "%s", b.jobs[b.unique_of[i]].symbol);
    out[i].unique = -1;
  }
  /* Each job's first module is the unique one; it takes the job's object when asked. */
  for (size_t i = 0; i < n && !s; i++) {
    job_t *x = &b.jobs[b.unique_of[i]];
    if (x->kir != mods[i] || out[i].unique >= 0) continue;
    for (size_t k = i; k < n; k++)
      if (b.unique_of[k] == b.unique_of[i]) out[k].unique = (int)i;
    if (o.keep_objects) {
      out[i].object = x->image;
      out[i].object_size = x->size;
      x->image = NULL;
    }
  }
  st->link_ms += kiln_clock_ms() - t0;
  kiln_free(addr);
  kiln_oom_undefer(&unwind.cleanup);
  batch_free(&b);
  if (s) memset(out, 0, n * sizeof(*out));
  return s;
}

void kiln_kir_host_kernels_free(kiln_kir_host_kernel_t *k, size_t n) {
  for (size_t i = 0; k && i < n; i++) {
    kiln_free(k[i].object);
    k[i].object = NULL;
  }
}

kiln_status kiln_kir_compile_host(const kiln_kir_module_t *m, kiln_host_jit_t *jit,
                                  kiln_kir_host_kernel_t *out) {
  memset(out, 0, sizeof(*out));
  if (!m || !jit) return KILN_ERR_INVALID("kir compile host: NULL module or JIT");
  return kiln_status_annotate(kiln_kir_compile_host_batch(&m, 1, jit, NULL, out, NULL),
                              "compiling %s for the host", m->name);
}

kiln_status kiln_kir_compile_nvptx_batch(const kiln_kir_module_t *const *mods, size_t n,
                                         const kiln_nvptx_options_t *nvptx,
                                         const kiln_kir_batch_options_t *opts,
                                         kiln_kir_gpu_kernel_t *out,
                                         kiln_kir_batch_stats_t *stats) {
  kiln_kir_batch_stats_t local;
  kiln_kir_batch_stats_t *st = stats ? stats : &local;
  memset(st, 0, sizeof(*st));
  if (n == 0) return NULL;
  memset(out, 0, n * sizeof(*out));
  if (!mods || !out) return KILN_ERR_INVALID("kir compile nvptx: NULL argument");
  for (size_t i = 0; i < n; i++)
    if (!mods[i] || !kiln_kir_module_kernel(mods[i]))
      return KILN_ERR_INVALID("kir compile nvptx: module %zu has no kernel", i);
  kiln_kir_batch_options_t o = {0};
  if (opts) o = *opts;
  kiln_nvptx_options_t no = {0};
  if (nvptx) no = *nvptx;
  if (!no.arch || !no.arch[0]) no.arch = KILN_NVPTX_DEFAULT_ARCH;
  LLVMTargetMachineRef tm = NULL;
  KILN_RETURN_IF_ERROR(kiln_nvptx_target_machine_create(no.arch, no.features, &tm),
                       "compiling kernels for NVPTX");
  kiln_strbuf_t target = {0};
  kiln_strbuf_printf(&target, "nvptx|%s|%s|%s|ftz%d|via%d", no.arch, no.features ? no.features : "",
                     no.pipeline ? no.pipeline : "", no.ftz ? 1 : 0, (int)no.cubin_via);
  batch_t b;
  memset(&b, 0, sizeof(b));
  batch_unwind_t unwind = {.b = &b, .tm = tm};
  kiln_oom_defer(&unwind.cleanup, batch_free_on_unwind, &unwind);
  batch_plan(&b, mods, n, kiln_strbuf_cstr(&target), o.cache_dir, KILN_KERNEL_CACHE_CUDA,
             !kiln_backend_dump_dir(no.dump_dir), st);
  kiln_strbuf_free(&target);
  for (size_t j = 0; j < b.num_jobs; j++) b.jobs[j].nvptx = &no;
  kiln_status s = batch_compile(&b, &o, st, tm);
  LLVMDisposeTargetMachine(tm);
  unwind.tm = NULL;
  for (size_t i = 0; i < n && !s; i++) {
    job_t *x = &b.jobs[b.unique_of[i]];
    out[i].image = kiln_malloc(x->size ? x->size : 1);
    memcpy(out[i].image, x->image, x->size);
    out[i].size = x->size;
    snprintf(out[i].symbol, sizeof(out[i].symbol), "%s", x->symbol);
  }
  /* out[i].unique: the first module compiled to the same code */
  for (size_t i = 0; i < n && !s; i++) {
    out[i].unique = (int)i;
    for (size_t p = 0; p < i; p++)
      if (b.unique_of[p] == b.unique_of[i]) {
        out[i].unique = (int)p;
        break;
      }
  }
  kiln_oom_undefer(&unwind.cleanup);
  batch_free(&b);
  if (s) kiln_kir_gpu_kernels_free(out, n);
  return s;
}

void kiln_kir_gpu_kernels_free(kiln_kir_gpu_kernel_t *k, size_t n) {
  for (size_t i = 0; i < n; i++) {
    kiln_free(k[i].image);
    memset(&k[i], 0, sizeof(k[i]));
  }
}
