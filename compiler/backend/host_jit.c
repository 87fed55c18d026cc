/* Host backend through ORC LLJIT (llvm-c/LLJIT.h, llvm-c/Orc.h). */
#include "base/clock.h"
#include "compiler/backend/host_jit.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/BitWriter.h>
#include <llvm-c/LLJIT.h>
#include <llvm-c/Orc.h>
#include <llvm-c/Transforms/PassBuilder.h>
#include <llvm/Config/llvm-config.h> /* LLVM_DEFAULT_TARGET_TRIPLE */
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "base/alloc.h"
#include "base/hashmap.h"
#include "base/log.h"
#include "base/str.h"
#include "compiler/backend/host_elf.h"
#include "compiler/backend/llvm_compat.h"
#include "compiler/backend/llvm_init.h"

/* The two ways a kernel is compiled: the JIT's pipeline and full code generation, or the
 * small tier (kiln_host_jit_compile_small_object). */
typedef enum { TIER_FULL, TIER_SMALL, KILN_HOST_TIERS } tier_t;

struct kiln_host_jit {
  LLVMOrcLLJITRef lljit; /* made by the first ORC use (ensure_lljit_locked): a JIT whose
                            objects all went through kiln's ELF loader never makes one */
  LLVMOrcThreadSafeContextRef tsc;
  LLVMContextRef ctx;      /* inside tsc */
  LLVMTargetMachineRef tm; /* for LLVMRunPasses and assembly dumps: made by the first
                              add_module (under `mutex`), so a JIT that only links objects
                              (an executable from the cache) never pays for it */
  char *triple, *cpu, *features, *pipeline, *dump_dir;
  bool small_tier;              /* kiln_host_jit_small_tier */
  bool objects_only;            /* kiln_host_jit_options_t.objects_only */
  bool orc_link;                /* kiln_host_jit_options_t.orc_link */
  pthread_mutex_t mutex;        /* serializes add_module and lookup */
  kiln_strbuf_t diag;           /* LLVM error diagnostics since the last report */
  pthread_mutex_t report_mutex; /* guards reports: ORC may report from any thread */
  kiln_strbuf_t reports;        /* ORC error-reporter messages since the last lookup */
  kiln_host_jit_stats_t stats;
  kiln_hashmap_t objects;   /* names of the objects added (kiln_host_jit_add_object) */
  kiln_host_elf_t **images; /* kiln_host_jit_link's images, freed with the JIT */
  size_t num_images;
  /* Target machines kiln_host_jit_compile_object / _small_object made and is not using, per
   * tier (under `mutex`): the next compile of the tier takes one instead of making its own (a
   * target machine and its X86 subtarget cost ~5 M instructions, a third of a small kernel's
   * compile). One thread at a time uses each. */
  LLVMTargetMachineRef *idle_tms[KILN_HOST_TIERS];
  size_t num_idle_tms[KILN_HOST_TIERS];
};

/* LLVM reports some failures as diagnostics; without a handler, an error diagnostic exits
 * the process. Errors are kept for the next status, warnings are logged. */
static void jit_diagnostic(LLVMDiagnosticInfoRef info, void *ctx) {
  kiln_host_jit_t *jit = ctx;
  char *desc = LLVMGetDiagInfoDescription(info);
  LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(info);
  if (sev == LLVMDSError) {
    kiln_strbuf_printf(&jit->diag, "%s%s", jit->diag.len ? "; " : "", desc ? desc : "");
  } else if (sev == LLVMDSWarning) {
    KILN_LOG_W("host JIT: %s", desc ? desc : "");
  }
  LLVMDisposeMessage(desc);
}

/* Failures ORC cannot hand to the caller directly: a lookup only learns "failed to
 * materialize", while the cause (say, an unresolved external) comes here. Kept so that the
 * failing lookup's status can name it. */
static void jit_error_reporter(void *ctx, LLVMErrorRef err) {
  kiln_host_jit_t *jit = ctx;
  char *msg = LLVMGetErrorMessage(err);
  KILN_LOG_D("host JIT: %s", msg ? msg : "(no message)");
  kiln_mutex_lock(&jit->report_mutex);
  if (jit->reports.len < 16384)
    kiln_strbuf_printf(&jit->reports, "%s%s", jit->reports.len ? "; " : "", msg ? msg : "");
  kiln_mutex_unlock(&jit->report_mutex);
  LLVMDisposeErrorMessage(msg);
}

static kiln_status create_host_tm(const char *triple, const char *cpu, const char *features,
                                  LLVMCodeGenOptLevel level, LLVMTargetMachineRef *out) {
  LLVMTargetRef target = NULL;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(triple, &target, &err)) {
    kiln_status s = kiln_status_make(KILN_UNAVAILABLE, "no LLVM target for host triple %s: %s",
                                     triple, err ? err : "");
    LLVMDisposeMessage(err);
    return s;
  }
  *out = LLVMCreateTargetMachine(target, triple, cpu, features, level, LLVMRelocPIC,
                                 LLVMCodeModelJITDefault);
  if (!*out)
    return kiln_status_make(KILN_INTERNAL, "cannot create a target machine for %s", triple);
  return NULL;
}

/* Whether `opts` sets the pipeline: then it applies to every kernel (no small tier). */
static bool pipeline_set(const kiln_host_jit_options_t *opts) {
  return opts->pipeline && opts->pipeline[0];
}

/* The target a JIT made with `opts` compiles for (the environment read as documented). */
typedef struct host_target {
  char *triple, *cpu, *features, *pipeline;
} host_target_t;

/* The host's triple, CPU and features, asked of LLVM once per process (they do not change,
 * and probing them cost 0.1-0.3 ms per JIT and per executable-cache key). Empty when a
 * string did not fit: then LLVM is asked each time. */
static char g_host_triple[256], g_host_cpu[128], g_host_features[8192];
static pthread_once_t g_host_once = PTHREAD_ONCE_INIT;

static void probe_host(void) {
  char *s[3] = {LLVMGetDefaultTargetTriple(), LLVMGetHostCPUName(), LLVMGetHostCPUFeatures()};
  char *dst[3] = {g_host_triple, g_host_cpu, g_host_features};
  size_t cap[3] = {sizeof(g_host_triple), sizeof(g_host_cpu), sizeof(g_host_features)};
  for (int i = 0; i < 3; i++) {
    if (s[i] && strlen(s[i]) < cap[i]) memcpy(dst[i], s[i], strlen(s[i]) + 1);
    LLVMDisposeMessage(s[i]);
  }
}

/* a, b and c concatenated in an allocation of `alloc` (kiln_try_malloc: NULL when refused). */
typedef void *(*alloc_fn)(size_t);
static char *concat(alloc_fn alloc, const char *a, const char *b, const char *c) {
  size_t na = strlen(a), nb = strlen(b), nc = strlen(c);
  char *r = alloc(na + nb + nc + 1);
  if (!r) return NULL;
  memcpy(r, a, na);
  memcpy(r + na, b, nb);
  memcpy(r + na + nb, c, nc + 1);
  return r;
}

/* A copy of the memo, or of LLVM's answer when there is none (NULL when refused). */
static char *host_string(alloc_fn alloc, const char *memo, char *(*ask)(void)) {
  if (memo[0]) return concat(alloc, memo, "", "");
  char *s = ask();
  char *r = concat(alloc, s ? s : "", "", "");
  LLVMDisposeMessage(s);
  return r;
}

static void target_free(host_target_t *t) {
  kiln_free(t->triple);
  kiln_free(t->cpu);
  kiln_free(t->features);
  kiln_free(t->pipeline);
}

/* With `alloc` kiln_try_malloc: false (nothing held) when an allocation is refused. */
static bool resolve_target(const kiln_host_jit_options_t *opts, alloc_fn alloc, host_target_t *t) {
  memset(t, 0, sizeof *t);
  kiln_once(&g_host_once, probe_host);
  t->triple = host_string(alloc, g_host_triple, LLVMGetDefaultTargetTriple);
  const char *extra = opts->extra_features;
  if (opts->cpu && opts->cpu[0])
    t->cpu = concat(alloc, opts->cpu, "", "");
  else
    t->cpu = host_string(alloc, g_host_cpu, LLVMGetHostCPUName);
  if (opts->features) {
    t->features = concat(alloc, opts->features, "", "");
  } else {
    char *s = host_string(alloc, g_host_features, LLVMGetHostCPUFeatures);
    if (s) t->features = concat(alloc, s, extra && *extra ? "," : "", extra ? extra : "");
    kiln_free(s);
  }
  const char *pipeline = pipeline_set(opts) ? opts->pipeline : KILN_HOST_JIT_DEFAULT_PIPELINE;
  t->pipeline = concat(alloc, pipeline, "", "");
  if (t->triple && t->cpu && t->features && t->pipeline) return true;
  target_free(t);
  return false;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_HOST_CPUID_ID 1
/* The host as LLVM's x86 host detection sees it, without asking LLVM: sys::getHostCPUName and
 * getHostCPUFeatures are functions of the CPUID leaves below and of XCR0 (xgetbv), so for
 * one LLVM version (in every key through kiln_kernel_cache_key_begin) the raw leaves identify
 * the CPU name and feature string as well as the strings do. Asking LLVM costs ~0.4 ms in a
 * fresh process (its first touch of libLLVM's host-detection code and tables), which was
 * the whole executable-cache key of a process that then links with kiln's ELF loader and
 * never needs LLVM otherwise. Leaf 1's EBX keeps only its low 16 bits (the initial APIC id
 * above them differs from core to core). */
static char g_cpuid_id[512];
static pthread_once_t g_cpuid_once = PTHREAD_ONCE_INIT;

static void probe_cpuid(void) {
  static const unsigned kLeaves[][2] = {
      {0, 0},    {1, 0},    {7, 0},           {7, 1},           {0xd, 1},        {0x14, 0},
      {0x19, 0}, {0x24, 0}, {0x80000000u, 0}, {0x80000001u, 0}, {0x80000008u, 0}};
  unsigned max = __get_cpuid_max(0, NULL), ext = __get_cpuid_max(0x80000000u, NULL);
  size_t n = 0;
  bool osxsave = false;
  for (size_t i = 0; i < sizeof kLeaves / sizeof kLeaves[0]; i++) {
    unsigned leaf = kLeaves[i][0], a = 0, b = 0, c = 0, d = 0;
    if (leaf <= (leaf >= 0x80000000u ? ext : max)) __cpuid_count(leaf, kLeaves[i][1], a, b, c, d);
    if (leaf == 1) {
      b &= 0xffffu;
      osxsave = (c >> 27) & 1;
    }
    n += (size_t)snprintf(g_cpuid_id + n, sizeof g_cpuid_id - n, "%x.%x.%x.%x,", a, b, c, d);
  }
  unsigned lo = 0, hi = 0;
  if (osxsave) __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  snprintf(g_cpuid_id + n, sizeof g_cpuid_id - n, "xcr0=%x.%x", hi, lo);
}
#else
#define KILN_HOST_CPUID_ID 0
#endif

void kiln_host_jit_target_id(const kiln_host_jit_options_t *opts, kiln_strbuf_t *out) {
  static const kiln_host_jit_options_t kDefaults = {0};
  if (!opts) opts = &kDefaults;
#if KILN_HOST_CPUID_ID
  kiln_once(&g_cpuid_once, probe_cpuid);
  const char *pipeline = pipeline_set(opts) ? opts->pipeline : KILN_HOST_JIT_DEFAULT_PIPELINE;
  kiln_strbuf_printf(out, "host|%s|cpu=%s|features=%s|extra=%s|cpuid=%s|%s%s",
                     LLVM_DEFAULT_TARGET_TRIPLE, opts->cpu && opts->cpu[0] ? opts->cpu : "(host)",
                     opts->features ? opts->features : "(host)",
                     opts->extra_features ? opts->extra_features : "", g_cpuid_id, pipeline,
                     pipeline_set(opts) ? "" : "|small-tier");
#else
  host_target_t t;
  resolve_target(opts, kiln_malloc, &t); /* aborts on exhaustion, as the key's buffer does */
  kiln_strbuf_printf(out, "host|%s|%s|%s|%s%s", t.triple, t.cpu, t.features, t.pipeline,
                     pipeline_set(opts) ? "" : "|small-tier");
  target_free(&t);
#endif
}

/* Makes the JIT's LLJIT if it has none yet (jit->mutex held): ~5 M instructions and two
 * target machines, which a JIT whose objects kiln's ELF loader links never needs. */
static kiln_status ensure_lljit_locked(kiln_host_jit_t *jit) {
  if (jit->lljit) return NULL;
  /* The JIT's builder takes a target machine made with the JIT's settings (it consumes it),
   * or for objects only the host as detected; the target machine the optimizer and dumps use
   * comes with the first module (add_module_locked). */
  LLVMOrcJITTargetMachineBuilderRef jtmb = NULL;
  kiln_status st = NULL;
  if (jit->objects_only) {
    st = kiln_llvm_error_to_status(LLVMOrcJITTargetMachineBuilderDetectHost(&jtmb), KILN_INTERNAL,
                                   "detecting the host for the JIT");
  } else {
    LLVMTargetMachineRef jit_tm = NULL;
    st = create_host_tm(jit->triple, jit->cpu, jit->features, LLVMCodeGenLevelAggressive, &jit_tm);
    if (!st) jtmb = LLVMOrcJITTargetMachineBuilderCreateFromTargetMachine(jit_tm); /* consumes */
  }
  if (st) return st;
  LLVMOrcLLJITBuilderRef builder = LLVMOrcCreateLLJITBuilder();
  LLVMOrcLLJITBuilderSetJITTargetMachineBuilder(builder, jtmb); /* consumes */
  LLVMOrcLLJITRef lljit = NULL;
  LLVMErrorRef err = LLVMOrcCreateLLJIT(&lljit, builder); /* consumes */
  if (err) return kiln_llvm_error_to_status(err, KILN_INTERNAL, "LLVMOrcCreateLLJIT");
  LLVMOrcExecutionSessionSetErrorReporter(LLVMOrcLLJITGetExecutionSession(lljit),
                                          jit_error_reporter, jit);
  LLVMOrcDefinitionGeneratorRef gen = NULL;
  err = LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
      &gen, LLVMOrcLLJITGetGlobalPrefix(lljit), NULL, NULL);
  if (err) {
    st = kiln_llvm_error_to_status(err, KILN_INTERNAL, "process symbol generator");
    LLVMErrorRef derr = LLVMOrcDisposeLLJIT(lljit);
    if (derr) LLVMConsumeError(derr);
    return st;
  }
  LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(lljit), gen); /* takes gen */
  jit->lljit = lljit;
  return NULL;
}

kiln_status kiln_host_jit_create(const kiln_host_jit_options_t *opts, kiln_host_jit_t **out) {
  *out = NULL;
  static const kiln_host_jit_options_t kDefaults = {0};
  if (!opts) opts = &kDefaults;
  KILN_RETURN_IF_ERROR(kiln_llvm_init_native(), "while creating the host JIT");

  /* Fallible (kiln_try_*): a JIT is made while other compiled work is held. */
  host_target_t t;
  if (!resolve_target(opts, kiln_try_malloc, &t))
    return KILN_ERR_EXHAUSTED("host JIT: out of host memory");
  const char *dump_dir = kiln_backend_dump_dir(opts->dump_dir);
  char *dump_copy = dump_dir ? concat(kiln_try_malloc, dump_dir, "", "") : NULL;
  kiln_host_jit_t *jit = kiln_try_calloc(1, sizeof *jit);
  if (!jit || (dump_dir && !dump_copy)) {
    target_free(&t);
    kiln_free(dump_copy);
    kiln_free(jit);
    return KILN_ERR_EXHAUSTED("host JIT: out of host memory");
  }
  pthread_mutex_init(&jit->mutex, NULL);
  pthread_mutex_init(&jit->report_mutex, NULL);
  kiln_hashmap_init(&jit->objects);
  jit->triple = t.triple;
  jit->cpu = t.cpu;
  jit->features = t.features;
  jit->pipeline = t.pipeline;
  jit->small_tier = !pipeline_set(opts);
  jit->dump_dir = dump_copy;

  jit->objects_only = opts->objects_only;
  jit->orc_link = opts->orc_link;
  kiln_llvm_tsc_create(&jit->tsc, &jit->ctx);
  LLVMContextSetDiagnosticHandler(jit->ctx, jit_diagnostic, jit);
  KILN_LOG_I("host JIT: %s, cpu %s", jit->triple, jit->cpu);
  *out = jit;
  return NULL;
}

LLVMContextRef kiln_host_jit_context(kiln_host_jit_t *jit) {
  return jit->ctx;
}
const char *kiln_host_jit_cpu(const kiln_host_jit_t *jit) {
  return jit->cpu;
}
const char *kiln_host_jit_features(const kiln_host_jit_t *jit) {
  return jit->features;
}

bool kiln_host_feature_on(const char *features, const char *name) {
  bool on = false;
  size_t n = strlen(name);
  for (const char *p = features; p && *p;) {
    const char *e = strchr(p, ',');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    if (len == n + 1 && (*p == '+' || *p == '-') && strncmp(p + 1, name, n) == 0) on = *p == '+';
    p = e ? e + 1 : NULL;
  }
  return on;
}

kiln_host_jit_stats_t kiln_host_jit_stats(kiln_host_jit_t *jit) {
  kiln_mutex_lock(&jit->mutex);
  kiln_host_jit_stats_t s = jit->stats;
  kiln_mutex_unlock(&jit->mutex);
  return s;
}

/* Moves a module from a foreign context into the JIT's through bitcode. Consumes `m`. */
static kiln_status adopt_module(kiln_host_jit_t *jit, LLVMModuleRef m, LLVMModuleRef *out) {
  *out = NULL;
  LLVMMemoryBufferRef buf = LLVMWriteBitcodeToMemoryBuffer(m);
  LLVMDisposeModule(m);
  if (!buf) return kiln_status_make(KILN_INTERNAL, "cannot serialize module to bitcode");
  LLVMBool failed = LLVMParseBitcodeInContext2(jit->ctx, buf, out);
  LLVMDisposeMemoryBuffer(buf);
  if (failed) {
    *out = NULL;
    return kiln_status_make(KILN_INTERNAL, "cannot re-read module bitcode in the JIT context");
  }
  return NULL;
}

static void dump_warn(kiln_status s) {
  if (!s) return;
  KILN_LOG_W("dump failed: %s", kiln_status_message(s));
  kiln_status_free(s);
}

/* Adds an object file (copied) to the main JITDylib. */
static kiln_status add_object_locked(kiln_host_jit_t *jit, const void *data, size_t len,
                                     const char *name) {
  KILN_RETURN_IF_ERROR(ensure_lljit_locked(jit), "while adding the object file of %s", name);
  LLVMMemoryBufferRef buf =
      LLVMCreateMemoryBufferWithMemoryRangeCopy((const char *)data, len, name);
  LLVMErrorRef err =
      LLVMOrcLLJITAddObjectFile(jit->lljit, LLVMOrcLLJITGetMainJITDylib(jit->lljit), buf);
  if (err) { /* the JIT took the buffer even on failure */
    char *text = LLVMGetErrorMessage(err);
    kiln_status_code_t code =
        strstr(text, "Duplicate definition") ? KILN_ALREADY_EXISTS : KILN_INTERNAL;
    kiln_status s =
        kiln_status_make(code, "adding the object file of %s to the host JIT: %s", name, text);
    LLVMDisposeErrorMessage(text);
    return s;
  }
  jit->stats.modules++;
  return NULL;
}

/* Verifies `m`, gives it the JIT's triple and data layout, dumps it, optimizes it with `tm`
 * and dumps the result (and, with a dump folder, the assembly). Does not consume `m`. */
static kiln_status optimize_module(kiln_host_jit_t *jit, LLVMTargetMachineRef tm, LLVMModuleRef m,
                                   const char *name, const char *pipeline, double *opt_ms) {
  if (!pipeline) pipeline = jit->pipeline;
  char *msg = NULL;
  if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    kiln_status s =
        kiln_status_make(KILN_INVALID_ARGUMENT, "invalid LLVM module: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
    return s;
  }
  LLVMDisposeMessage(msg);
  LLVMSetTarget(m, jit->triple);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  char *dl = LLVMCopyStringRepOfTargetData(td);
  LLVMSetDataLayout(m, dl);
  LLVMDisposeMessage(dl);
  LLVMDisposeTargetData(td);
  if (jit->dump_dir)
    dump_warn(kiln_backend_dump_module(jit->dump_dir, name, KILN_DUMP_STAGE_LLVM_INPUT, m));
  double t0 = kiln_clock_ms();
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, pbo);
  LLVMDisposePassBuilderOptions(pbo);
  *opt_ms += kiln_clock_ms() - t0;
  if (err) {
    kiln_status s = kiln_llvm_error_to_status(err, KILN_INVALID_ARGUMENT, "LLVMRunPasses");
    return kiln_status_annotate(s, "pipeline \"%s\" on %s", pipeline, name);
  }
  if (jit->dump_dir) {
    dump_warn(kiln_backend_dump_module(jit->dump_dir, name, KILN_DUMP_STAGE_LLVM_OPT, m));
    char *text = NULL;
    size_t len = 0;
    kiln_status s = kiln_backend_emit_assembly(tm, m, true, &text, &len);
    if (!s)
      s = kiln_backend_dump_text(jit->dump_dir, name, KILN_DUMP_STAGE_HOST_ASM, "s", text, len);
    kiln_free(text);
    dump_warn(s);
  }
  return NULL;
}

static kiln_status add_module_locked(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name) {
  if (jit->objects_only) {
    LLVMDisposeModule(m);
    return KILN_ERR_INVALID("kiln_host_jit_add_module: this JIT links object files only");
  }
  if (LLVMGetModuleContext(m) != jit->ctx)
    KILN_RETURN_IF_ERROR(adopt_module(jit, m, &m), "while moving a module into the JIT context");
  size_t id_len = 0;
  if (!name) name = LLVMGetModuleIdentifier(m, &id_len);
  kiln_status s = NULL;
  if (!jit->tm)
    s = create_host_tm(jit->triple, jit->cpu, jit->features, LLVMCodeGenLevelAggressive, &jit->tm);
  if (s) {
    LLVMDisposeModule(m);
    return s;
  }
  if (!s) s = ensure_lljit_locked(jit);
  if (s) {
    LLVMDisposeModule(m);
    return s;
  }
  char *dump_name = kiln_strdup(name && name[0] ? name : "module");
  s = optimize_module(jit, jit->tm, m, dump_name, NULL, &jit->stats.opt_ms);
  if (s) {
    LLVMDisposeModule(m);
    kiln_free(dump_name);
    return s;
  }
  LLVMOrcThreadSafeModuleRef tsm = LLVMOrcCreateNewThreadSafeModule(m, jit->tsc); /* takes m */
  LLVMErrorRef err =
      LLVMOrcLLJITAddLLVMIRModule(jit->lljit, LLVMOrcLLJITGetMainJITDylib(jit->lljit), tsm);
  if (err) { /* the JIT took the module even on failure (see LLJIT.h) */
    char *text = LLVMGetErrorMessage(err);
    kiln_status_code_t code =
        strstr(text, "Duplicate definition") ? KILN_ALREADY_EXISTS : KILN_INTERNAL;
    s = kiln_status_make(code, "adding module %s to the host JIT: %s", dump_name, text);
    LLVMDisposeErrorMessage(text);
    kiln_free(dump_name);
    return s;
  }
  jit->stats.modules++;
  kiln_free(dump_name);
  return NULL;
}

/* Errors a worker's context reports while it compiles. */
static void collect_diagnostic(LLVMDiagnosticInfoRef info, void *ctx) {
  kiln_strbuf_t *b = ctx;
  if (LLVMGetDiagInfoSeverity(info) != LLVMDSError) return;
  char *desc = LLVMGetDiagInfoDescription(info);
  kiln_strbuf_printf(b, "%s%s", b->len ? "; " : "", desc ? desc : "");
  LLVMDisposeMessage(desc);
}

/* Per tier, whether LLVM's lazily created globals for it exist (kiln_host_jit_prepare_threads):
 * until then, the tier's compiles run one at a time under g_warm_mutex, the first one making
 * them. */
static atomic_bool g_warm[KILN_HOST_TIERS];
static pthread_mutex_t g_warm_mutex = PTHREAD_MUTEX_INITIALIZER;

static kiln_status compile_object(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name,
                                  tier_t tier, const char *pipeline, void **obj, size_t *obj_len);

/* compile_object, alone under g_warm_mutex while the tier is not warm yet. */
static kiln_status compile_tier(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name,
                                tier_t tier, const char *pipeline, void **obj, size_t *obj_len) {
  *obj = NULL;
  *obj_len = 0;
  if (!jit || !m) {
    if (m) LLVMDisposeModule(m);
    return KILN_ERR_INVALID("kiln_host_jit_compile_object: NULL argument");
  }
  if (atomic_load_explicit(&g_warm[tier], memory_order_acquire))
    return compile_object(jit, m, name, tier, pipeline, obj, obj_len);
  /* The process's first compile of the tier: alone, so that it makes LLVM's lazy globals
   * before any other thread compiles (a batch of one kernel then pays no separate warm-up
   * compile). */
  kiln_mutex_lock(&g_warm_mutex);
  kiln_status s = compile_object(jit, m, name, tier, pipeline, obj, obj_len);
  atomic_store_explicit(&g_warm[tier], true, memory_order_release);
  kiln_mutex_unlock(&g_warm_mutex);
  return s;
}

kiln_status kiln_host_jit_compile_object(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name,
                                         void **obj, size_t *obj_len) {
  return compile_tier(jit, m, name, TIER_FULL, NULL, obj, obj_len);
}

kiln_status kiln_host_jit_compile_small_object(kiln_host_jit_t *jit, LLVMModuleRef m,
                                               const char *name, void **obj, size_t *obj_len) {
  return compile_tier(jit, m, name, TIER_SMALL, KILN_HOST_JIT_SMALL_PIPELINE, obj, obj_len);
}

/* Compiles `m` on `tier` with `pipeline` (NULL: the JIT's). */
static kiln_status compile_object(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name,
                                  tier_t tier, const char *pipeline, void **obj, size_t *obj_len) {
  if (!name || !name[0]) name = "module";
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  kiln_strbuf_t diag = {0};
  LLVMContextSetDiagnosticHandler(ctx, collect_diagnostic, &diag);
  LLVMTargetMachineRef tm = NULL;
  double opt_ms = 0, t0 = kiln_clock_ms();
  kiln_mutex_lock(&jit->mutex);
  if (jit->num_idle_tms[tier]) tm = jit->idle_tms[tier][--jit->num_idle_tms[tier]];
  kiln_mutex_unlock(&jit->mutex);
  kiln_status s =
      tm ? NULL
         : create_host_tm(jit->triple, jit->cpu, jit->features,
                          tier == TIER_SMALL ? LLVMCodeGenLevelNone : LLVMCodeGenLevelAggressive,
                          &tm);
  if (!s) s = optimize_module(jit, tm, m, name, pipeline, &opt_ms);
  if (!s) {
    char *emsg = NULL;
    LLVMMemoryBufferRef buf = NULL;
    if (LLVMTargetMachineEmitToMemoryBuffer(tm, m, LLVMObjectFile, &emsg, &buf)) {
      s = kiln_status_make(KILN_INTERNAL, "emitting the object file of %s: %s", name,
                           emsg ? emsg : "");
      LLVMDisposeMessage(emsg);
    } else {
      *obj_len = LLVMGetBufferSize(buf);
      *obj = kiln_try_malloc(*obj_len ? *obj_len : 1); /* LLVM's work is held: fallible */
      if (*obj)
        memcpy(*obj, LLVMGetBufferStart(buf), *obj_len);
      else
        s = KILN_ERR_EXHAUSTED("out of host memory for the object code of %s", name);
      LLVMDisposeMemoryBuffer(buf);
    }
  }
  if (!s && diag.len)
    s = kiln_status_make(KILN_INTERNAL, "LLVM reported while compiling %s: %s", name,
                         kiln_strbuf_cstr(&diag));
  if (s) {
    kiln_free(*obj);
    *obj = NULL;
    *obj_len = 0;
  }
  LLVMContextSetDiagnosticHandler(ctx, NULL, NULL);
  kiln_strbuf_free(&diag);
  LLVMDisposeModule(m);
  if (s && tm) { /* not reused after a failure */
    LLVMDisposeTargetMachine(tm);
    tm = NULL;
  }
  kiln_mutex_lock(&jit->mutex);
  if (tm) { /* kept for the next compile; disposed when there is no room to keep it */
    LLVMTargetMachineRef *idle = kiln_try_realloc(
        jit->idle_tms[tier], (jit->num_idle_tms[tier] + 1) * sizeof(*jit->idle_tms[tier]));
    if (idle) {
      jit->idle_tms[tier] = idle;
      jit->idle_tms[tier][jit->num_idle_tms[tier]++] = tm;
    } else {
      LLVMDisposeTargetMachine(tm);
    }
  }
  jit->stats.opt_ms += opt_ms;
  jit->stats.codegen_ms += kiln_clock_ms() - t0 - opt_ms;
  kiln_mutex_unlock(&jit->mutex);
  return s;
}

/* Compiles an empty module on `tier` unless the tier is warm. */
static void warm_up(kiln_host_jit_t *jit, tier_t tier) {
  if (atomic_load_explicit(&g_warm[tier], memory_order_acquire)) return;
  LLVMContextRef ctx = LLVMContextCreate();
  LLVMModuleRef m = LLVMModuleCreateWithNameInContext("kiln_warm_up", ctx);
  LLVMTypeRef fty = LLVMFunctionType(LLVMVoidTypeInContext(ctx), NULL, 0, 0);
  LLVMValueRef f = LLVMAddFunction(m, "kiln_warm_up", fty);
  LLVMBuilderRef b = LLVMCreateBuilderInContext(ctx);
  LLVMPositionBuilderAtEnd(b, LLVMAppendBasicBlockInContext(ctx, f, "entry"));
  LLVMBuildRetVoid(b);
  LLVMDisposeBuilder(b);
  void *obj = NULL;
  size_t len = 0;
  /* The full tier's warm-up needs its code generator, not O3's passes on an empty module:
   * O1 when the JIT runs the default pipeline. */
  const char *pipeline = tier == TIER_SMALL ? KILN_HOST_JIT_SMALL_PIPELINE
                         : strcmp(jit->pipeline, KILN_HOST_JIT_DEFAULT_PIPELINE) ? NULL
                                                                                 : "default<O1>";
  kiln_status s = compile_tier(jit, m, "kiln_warm_up", tier, pipeline, &obj, &len);
  if (s) KILN_LOG_W("host JIT warm-up: %s", kiln_status_message(s));
  kiln_status_free(s);
  kiln_free(obj);
  LLVMContextDispose(ctx);
}

void kiln_host_jit_prepare_threads(kiln_host_jit_t *jit, bool full, bool small) {
  if (!jit) return;
  if (full) warm_up(jit, TIER_FULL);
  if (small) warm_up(jit, TIER_SMALL);
}

kiln_status kiln_host_jit_add_object(kiln_host_jit_t *jit, const void *data, size_t len,
                                     const char *name) {
  if (!jit || !data) return KILN_ERR_INVALID("kiln_host_jit_add_object: NULL argument");
  if (!name) name = "object";
  kiln_mutex_lock(&jit->mutex);
  kiln_status s = NULL;
  if (!kiln_hashmap_contains(&jit->objects, name, strlen(name))) {
    s = add_object_locked(jit, data, len, name);
    if (!s) kiln_hashmap_put(&jit->objects, name, strlen(name), jit);
  }
  kiln_mutex_unlock(&jit->mutex);
  return s;
}

/* Loads the `m` objects with kiln's ELF loader and looks up the `n` symbols into addrs:
 * *img the image, or NULL (addrs cleared) when the loader refused, which is logged (the caller
 * links with ORC instead). Out of host memory is the one refusal returned as the error. */
static kiln_status elf_link(const void *const *objs, const size_t *lens, int m,
                            const char *const *symbols, int n, void **addrs,
                            kiln_host_elf_t **img) {
  *img = NULL;
  kiln_status s = kiln_host_elf_load(objs, lens, m, NULL, NULL, img);
  for (int i = 0; i < n && !s; i++) s = kiln_host_elf_lookup(*img, symbols[i], &addrs[i]);
  if (!s) return NULL;
  kiln_host_elf_destroy(*img);
  *img = NULL;
  for (int i = 0; i < n; i++) addrs[i] = NULL;
  if (kiln_status_code(s) == KILN_RESOURCE_EXHAUSTED) return s;
  KILN_LOG_I("kiln's ELF loader refused %d object(s), linking with ORC: %s", m,
             kiln_status_message(s));
  kiln_status_free(s);
  return NULL;
}

kiln_status kiln_host_jit_link(kiln_host_jit_t *jit, const void *const *objects,
                               const size_t *sizes, const char *const *symbols, int n,
                               void **addrs) {
  if (!jit || n < 0 || (n && (!objects || !sizes || !symbols || !addrs)))
    return KILN_ERR_INVALID("kiln_host_jit_link: NULL argument");
  for (int i = 0; i < n; i++) {
    addrs[i] = NULL;
    if (!objects[i] || !symbols[i])
      return KILN_ERR_INVALID("kiln_host_jit_link: object %d is NULL", i);
  }
  if (n == 0) return NULL;
  kiln_host_elf_t *img = NULL;
  if (!jit->orc_link)
    KILN_RETURN_IF_ERROR_PLAIN(elf_link(objects, sizes, n, symbols, n, addrs, &img));
  if (img) {
    kiln_mutex_lock(&jit->mutex);
    kiln_host_elf_t **images =
        kiln_try_realloc(jit->images, (jit->num_images + 1) * sizeof(*jit->images));
    if (images) {
      jit->images = images;
      jit->images[jit->num_images++] = img;
      jit->stats.modules += (size_t)n;
    }
    kiln_mutex_unlock(&jit->mutex);
    if (images) return NULL;
    kiln_host_elf_destroy(img);
    for (int i = 0; i < n; i++) addrs[i] = NULL;
    return KILN_ERR_EXHAUSTED("host JIT link: out of host memory for the image list");
  }
  kiln_status s = NULL;
  for (int i = 0; i < n && !s; i++)
    s = kiln_host_jit_add_object(jit, objects[i], sizes[i], symbols[i]);
  for (int i = 0; i < n && !s; i++) s = kiln_host_jit_lookup(jit, symbols[i], &addrs[i]);
  if (s)
    for (int i = 0; i < n; i++) addrs[i] = NULL;
  return s;
}

const char *kiln_host_jit_triple(const kiln_host_jit_t *jit) {
  return jit->triple;
}
const char *kiln_host_jit_pipeline(const kiln_host_jit_t *jit) {
  return jit->pipeline;
}
bool kiln_host_jit_small_tier(const kiln_host_jit_t *jit) {
  return jit->small_tier;
}
const char *kiln_host_jit_dump_dir(const kiln_host_jit_t *jit) {
  return jit->dump_dir;
}

kiln_status kiln_host_jit_add_module(kiln_host_jit_t *jit, LLVMModuleRef m, const char *name) {
  if (!m) return KILN_ERR_INVALID("kiln_host_jit_add_module: NULL module");
  if (!jit) {
    LLVMDisposeModule(m);
    return KILN_ERR_INVALID("kiln_host_jit_add_module: NULL JIT");
  }
  kiln_mutex_lock(&jit->mutex);
  kiln_status s = add_module_locked(jit, m, name);
  if (!s && jit->diag.len)
    s = kiln_status_make(KILN_INTERNAL, "LLVM reported: %s", kiln_strbuf_cstr(&jit->diag));
  kiln_strbuf_free(&jit->diag);
  kiln_mutex_unlock(&jit->mutex);
  return s;
}

kiln_status kiln_host_jit_lookup(kiln_host_jit_t *jit, const char *name, void **out_addr) {
  if (out_addr) *out_addr = NULL;
  if (!jit || !name || !out_addr) return KILN_ERR_INVALID("kiln_host_jit_lookup: NULL argument");
  kiln_mutex_lock(&jit->mutex);
  kiln_mutex_lock(&jit->report_mutex);
  kiln_strbuf_free(&jit->reports);
  kiln_mutex_unlock(&jit->report_mutex);
  double t0 = kiln_clock_ms();
  LLVMOrcExecutorAddress addr = 0;
  kiln_status made = ensure_lljit_locked(jit);
  if (made) {
    kiln_mutex_unlock(&jit->mutex);
    return kiln_status_annotate(made, "while looking up %s", name);
  }
  LLVMErrorRef err = LLVMOrcLLJITLookup(jit->lljit, &addr, name);
  jit->stats.lookup_ms += kiln_clock_ms() - t0;
  kiln_status s = NULL;
  if (err) {
    char *text = LLVMGetErrorMessage(err);
    /* A plain "Symbols not found: [ name ]" means the name itself is missing; a failure
     * while materializing (say, an unresolved external in the module) is reported as is. */
    bool missing = strstr(text, "Symbols not found") && !strstr(text, "Failed to materialize");
    s = kiln_status_make(missing ? KILN_NOT_FOUND : KILN_INTERNAL,
                         missing ? "symbol '%s' not found in the host JIT: %s"
                                 : "host JIT lookup of '%s' failed: %s",
                         name, text);
    LLVMDisposeErrorMessage(text);
    kiln_mutex_lock(&jit->report_mutex);
    if (jit->reports.len)
      s = kiln_status_annotate(s, "caused by: %s", kiln_strbuf_cstr(&jit->reports));
    kiln_strbuf_free(&jit->reports);
    kiln_mutex_unlock(&jit->report_mutex);
  } else if (addr == 0) {
    s = kiln_status_make(KILN_NOT_FOUND, "symbol '%s' resolved to a null address", name);
  }
  if (jit->diag.len) {
    kiln_status d = kiln_status_make(KILN_INTERNAL,
                                     "LLVM reported while generating code for "
                                     "'%s': %s",
                                     name, kiln_strbuf_cstr(&jit->diag));
    s = kiln_status_join(s, d);
  }
  kiln_strbuf_free(&jit->diag);
  if (!s) *out_addr = (void *)(uintptr_t)addr;
  kiln_mutex_unlock(&jit->mutex);
  return s;
}

void kiln_host_jit_destroy(kiln_host_jit_t *jit) {
  if (!jit) return;
  if (jit->lljit) {
    LLVMErrorRef err = LLVMOrcDisposeLLJIT(jit->lljit);
    if (err) {
      char *text = LLVMGetErrorMessage(err);
      KILN_LOG_W("disposing the host JIT: %s", text);
      LLVMDisposeErrorMessage(text);
    }
  }
  /* Modules handed to the JIT are gone with it; the context goes with the last owner. */
  if (jit->tsc) LLVMOrcDisposeThreadSafeContext(jit->tsc);
  if (jit->tm) LLVMDisposeTargetMachine(jit->tm);
  for (int t = 0; t < KILN_HOST_TIERS; t++) {
    for (size_t i = 0; i < jit->num_idle_tms[t]; i++) LLVMDisposeTargetMachine(jit->idle_tms[t][i]);
    kiln_free(jit->idle_tms[t]);
  }
  for (size_t i = 0; i < jit->num_images; i++) kiln_host_elf_destroy(jit->images[i]);
  kiln_free(jit->images);
  kiln_strbuf_free(&jit->diag);
  kiln_strbuf_free(&jit->reports);
  kiln_free(jit->triple);
  kiln_free(jit->cpu);
  kiln_free(jit->features);
  kiln_free(jit->pipeline);
  kiln_free(jit->dump_dir);
  kiln_hashmap_free(&jit->objects);
  pthread_mutex_destroy(&jit->mutex);
  pthread_mutex_destroy(&jit->report_mutex);
  kiln_free(jit);
}

static _Atomic int64_t g_link_elf, g_link_orc, g_link_fallbacks;

kiln_host_link_counters_t kiln_host_link_counters(void) {
  kiln_host_link_counters_t c = {atomic_load(&g_link_elf), atomic_load(&g_link_orc),
                                 atomic_load(&g_link_fallbacks)};
  return c;
}

static void jit_owner_free(void *jit) {
  kiln_host_jit_destroy(jit);
}

static void elf_owner_free(void *img) {
  kiln_host_elf_destroy(img);
}

/* The objects-only JIT path of kiln_host_link_objects. */
static kiln_status link_with_orc(const void *const *objects, const size_t *sizes,
                                 const char *const *symbols, int n, void **addrs,
                                 kiln_host_linked_t *out) {
  kiln_host_jit_t *jit = NULL;
  const kiln_host_jit_options_t jo = {.objects_only = true};
  KILN_RETURN_IF_ERROR_PLAIN(kiln_host_jit_create(&jo, &jit));
  kiln_status s = NULL;
  for (int i = 0; i < n && !s; i++)
    s = kiln_host_jit_add_object(jit, objects[i], sizes[i], symbols[i]);
  for (int i = 0; i < n && !s; i++) s = kiln_host_jit_lookup(jit, symbols[i], &addrs[i]);
  if (s) {
    kiln_host_jit_destroy(jit);
    return s;
  }
  out->owner = jit;
  out->owner_free = jit_owner_free;
  out->elf = false;
  return NULL;
}

kiln_status kiln_host_link_objects(const void *const *objects, const size_t *sizes,
                                   const char *const *symbols, int n, bool orc_only, void **addrs,
                                   kiln_host_linked_t *out) {
  if (out) memset(out, 0, sizeof(*out));
  if (!out || n < 0 || (n && (!objects || !sizes || !symbols || !addrs)))
    return KILN_ERR_INVALID("kiln_host_link_objects: NULL argument");
  for (int i = 0; i < n; i++) {
    addrs[i] = NULL;
    if (!objects[i] || !symbols[i])
      return KILN_ERR_INVALID("kiln_host_link_objects: object %d is NULL", i);
  }
  if (!orc_only) {
    /* the distinct objects (one per symbol), then each symbol looked up */
    const void **objs = kiln_try_calloc(n ? (size_t)n : 1, sizeof(void *));
    size_t *lens = kiln_try_calloc(n ? (size_t)n : 1, sizeof(size_t));
    kiln_hashmap_t seen;
    kiln_hashmap_init(&seen);
    int m = 0;
    kiln_status s = objs && lens ? NULL : KILN_ERR_EXHAUSTED("host link: out of host memory");
    for (int i = 0; i < n && !s; i++) {
      if (kiln_hashmap_contains(&seen, symbols[i], strlen(symbols[i]))) continue;
      if (!kiln_hashmap_try_put(&seen, symbols[i], strlen(symbols[i]), (void *)objects[i]))
        s = KILN_ERR_EXHAUSTED("host link: out of host memory");
      objs[m] = objects[i];
      lens[m++] = sizes[i];
    }
    kiln_hashmap_free(&seen);
    kiln_host_elf_t *img = NULL;
    if (!s) s = elf_link(objs, lens, m, symbols, n, addrs, &img);
    kiln_free(objs);
    kiln_free(lens);
    if (s) return s;
    if (img) {
      out->owner = img;
      out->owner_free = elf_owner_free;
      out->elf = true;
      atomic_fetch_add(&g_link_elf, 1);
      return NULL;
    }
    atomic_fetch_add(&g_link_fallbacks, 1);
  } else {
    atomic_fetch_add(&g_link_orc, 1);
  }
  return link_with_orc(objects, sizes, symbols, n, addrs, out);
}
