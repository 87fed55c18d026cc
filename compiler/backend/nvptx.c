/* NVPTX backend: libdevice linking, optimization, PTX emission, PTX -> cubin. */
#define _GNU_SOURCE
#include "base/clock.h"
#include "compiler/backend/nvptx.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <llvm-c/Analysis.h>
#include <llvm-c/BitReader.h>
#include <llvm-c/Linker.h>
#include <llvm-c/Target.h>
#include <llvm-c/Transforms/PassBuilder.h>

#include "base/alloc.h"
#include "base/log.h"
#include "base/str.h"
#include "compiler/backend/llvm_compat.h"
#include "compiler/backend/llvm_init.h"
#include "compiler/backend/nvjitlink.h"

extern char **environ;

/* ---- processor table ------------------------------------------------------------------- */

typedef struct arch_entry {
  const char *name;
  const char *features;
  int ptx;      /* PTX ISA ×10 */
  int min_llvm; /* first LLVM major whose NVPTX backend knows the processor */
} arch_entry_t;

static const arch_entry_t kArchTable[] = {
    {"sm_50", "+ptx60", 60, 19},   {"sm_52", "+ptx60", 60, 19},   {"sm_53", "+ptx60", 60, 19},
    {"sm_60", "+ptx60", 60, 19},   {"sm_61", "+ptx60", 60, 19},   {"sm_62", "+ptx60", 60, 19},
    {"sm_70", "+ptx60", 60, 19},   {"sm_72", "+ptx61", 61, 19},   {"sm_75", "+ptx63", 63, 19},
    {"sm_80", "+ptx70", 70, 19},   {"sm_86", "+ptx71", 71, 19},   {"sm_87", "+ptx74", 74, 19},
    {"sm_89", "+ptx78", 78, 19},   {"sm_90", "+ptx80", 80, 19},   {"sm_90a", "+ptx80", 80, 19},
    {"sm_100", "+ptx86", 86, 20},  {"sm_100a", "+ptx86", 86, 20}, {"sm_101", "+ptx86", 86, 20},
    {"sm_101a", "+ptx86", 86, 20}, {"sm_120", "+ptx87", 87, 20},  {"sm_120a", "+ptx87", 87, 20},
};

kiln_status kiln_nvptx_arch_features(const char *arch, const char **features) {
  *features = NULL;
  if (!arch || !arch[0]) arch = KILN_NVPTX_DEFAULT_ARCH;
  for (size_t i = 0; i < sizeof kArchTable / sizeof *kArchTable; i++) {
    const arch_entry_t *e = &kArchTable[i];
    if (strcmp(e->name, arch) != 0) continue;
    if (e->min_llvm > KILN_LLVM_VERSION_MAJOR || e->ptx > KILN_LLVM_NVPTX_MAX_PTX)
      return kiln_status_make(KILN_UNIMPLEMENTED,
                              "NVPTX processor %s needs LLVM %d or newer (linked: LLVM %d)", arch,
                              e->min_llvm, KILN_LLVM_VERSION_MAJOR);
    *features = e->features;
    return NULL;
  }
  kiln_strbuf_t known = {0};
  for (size_t i = 0; i < sizeof kArchTable / sizeof *kArchTable; i++)
    if (kArchTable[i].min_llvm <= KILN_LLVM_VERSION_MAJOR)
      kiln_strbuf_printf(&known, "%s%s", known.len ? " " : "", kArchTable[i].name);
  kiln_status s =
      kiln_status_make(KILN_INVALID_ARGUMENT, "unknown NVPTX processor '%s' (known: %s)", arch,
                       kiln_strbuf_cstr(&known));
  kiln_strbuf_free(&known);
  return s;
}

/* The compute capability ×10 of "sm_XY" / "sm_XYZ" (a trailing "a" allowed), or -1. */
static int sm_number(const char *arch) {
  if (!arch || strncmp(arch, "sm_", 3) != 0) return -1;
  int v = 0, digits = 0;
  const char *p = arch + 3;
  for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++) v = v * 10 + (*p - '0');
  if (digits < 2 || (*p && strcmp(p, "a") != 0)) return -1;
  return v;
}

kiln_status kiln_nvptx_arch_resolve(const char *requested, char *arch, size_t arch_size,
                                    bool *ptx_only) {
  if (!arch || arch_size == 0 || !ptx_only) return KILN_ERR_INVALID("nvptx arch resolve: NULL");
  arch[0] = '\0';
  *ptx_only = false;
  if (!requested || !requested[0]) requested = KILN_NVPTX_DEFAULT_ARCH;
  const char *features = NULL;
  kiln_status s = kiln_nvptx_arch_features(requested, &features);
  if (!s) {
    snprintf(arch, arch_size, "%s", requested);
    return NULL;
  }
  const int want = sm_number(requested);
  if (want < 0) return s;
  /* The newest processor the linked LLVM knows that is not newer than the device: its PTX
   * is forward compatible (the driver compiles it for the device); a cubin would not be. */
  const arch_entry_t *best = NULL;
  for (size_t i = 0; i < sizeof kArchTable / sizeof *kArchTable; i++) {
    const arch_entry_t *e = &kArchTable[i];
    const int n = sm_number(e->name);
    if (e->name[strlen(e->name) - 1] == 'a' || n > want) continue;
    if (e->min_llvm > KILN_LLVM_VERSION_MAJOR || e->ptx > KILN_LLVM_NVPTX_MAX_PTX) continue;
    if (!best || n > sm_number(best->name)) best = e;
  }
  if (!best) return kiln_status_annotate(s, "and no older processor the linked LLVM knows");
  kiln_status_free(s);
  snprintf(arch, arch_size, "%s", best->name);
  *ptx_only = true;
  KILN_LOG_I(
      "NVPTX: %s is not known to LLVM %d; emitting PTX for %s and letting the driver "
      "compile it for the device",
      requested, KILN_LLVM_VERSION_MAJOR, best->name);
  return NULL;
}

void kiln_nvptx_set_max_threads(LLVMValueRef fn, unsigned x, unsigned y, unsigned z) {
  if (!fn || x == 0 || y == 0 || z == 0) return;
  LLVMModuleRef m = LLVMGetGlobalParent(fn);
  LLVMContextRef ctx = LLVMGetModuleContext(m);
#if KILN_LLVM_VERSION_MAJOR >= 21
  /* LLVM 21 replaced the annotations with a function attribute ("x,y,z"). */
  char v[48];
  int len = snprintf(v, sizeof(v), "%u,%u,%u", x, y, z);
  LLVMAddAttributeAtIndex(fn, LLVMAttributeFunctionIndex,
                          LLVMCreateStringAttribute(ctx, "nvvm.maxntid", 12, v, (unsigned)len));
#else
  /* LLVM 19 and 20 read !nvvm.annotations = !{!{ptr @fn, !"maxntidx", i32 x, ...}}. */
  LLVMTypeRef i32 = LLVMInt32TypeInContext(ctx);
  const char *keys[3] = {"maxntidx", "maxntidy", "maxntidz"};
  const unsigned vals[3] = {x, y, z};
  LLVMMetadataRef ops[7];
  ops[0] = LLVMValueAsMetadata(fn);
  for (int i = 0; i < 3; i++) {
    ops[1 + 2 * i] = LLVMMDStringInContext2(ctx, keys[i], 8);
    ops[2 + 2 * i] = LLVMValueAsMetadata(LLVMConstInt(i32, vals[i], 0));
  }
  LLVMAddNamedMetadataOperand(m, "nvvm.annotations",
                              LLVMMetadataAsValue(ctx, LLVMMDNodeInContext2(ctx, ops, 7)));
#endif
}

kiln_status kiln_nvptx_target_machine_create(const char *arch, const char *features,
                                             LLVMTargetMachineRef *out) {
  *out = NULL;
  if (!arch || !arch[0]) arch = KILN_NVPTX_DEFAULT_ARCH;
  const char *table_features = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_nvptx_arch_features(arch, &table_features));
  if (!features) features = table_features;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_llvm_init_nvptx());
  LLVMTargetRef target = NULL;
  char *err = NULL;
  if (LLVMGetTargetFromTriple(KILN_NVPTX_TRIPLE, &target, &err)) {
    kiln_status s = kiln_status_make(KILN_UNAVAILABLE, "the linked LLVM has no NVPTX target: %s",
                                     err ? err : "");
    LLVMDisposeMessage(err);
    return s;
  }
  *out =
      LLVMCreateTargetMachine(target, KILN_NVPTX_TRIPLE, arch, features, LLVMCodeGenLevelAggressive,
                              LLVMRelocDefault, LLVMCodeModelDefault);
  if (!*out)
    return kiln_status_make(KILN_INTERNAL, "cannot create NVPTX target machine for %s", arch);
  return NULL;
}

/* ---- running tools ----------------------------------------------------------------------- */

kiln_status kiln_nvptx_run_tool(const char *const argv[], char **output, int *exit_code) {
  *output = NULL;
  *exit_code = -1;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return kiln_status_make(KILN_INTERNAL, "pipe: %s", strerror(errno));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDERR_FILENO);
  pid_t pid;
  int rc = posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return kiln_status_make(KILN_UNAVAILABLE, "cannot run %s: %s", argv[0], strerror(rc));
  }
  kiln_strbuf_t out = {0};
  char chunk[4096];
  for (;;) {
    ssize_t n = read(fds[0], chunk, sizeof chunk);
    if (n > 0) {
      kiln_strbuf_append_n(&out, chunk, (size_t)n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status))
    *exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status))
    *exit_code = 128 + WTERMSIG(status);
  *output = kiln_strbuf_take(&out);
  return NULL;
}

static bool is_executable(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

/* Looks for ptxas in `exec_path`'s folders (unless the search is explicit), then under each
 * CUDA root. */
static char *find_ptxas(const kiln_cuda_dirs_t *dirs, const char *exec_path, kiln_strbuf_t *tried) {
  const char *path_env = exec_path;
  if (!dirs->explicit_dir && path_env && path_env[0]) {
    char *copy = kiln_strdup(path_env);
    char *save = NULL;
    for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
      kiln_strbuf_t p = {0};
      kiln_strbuf_printf(&p, "%s/ptxas", dir);
      if (is_executable(kiln_strbuf_cstr(&p))) {
        kiln_free(copy);
        return kiln_strbuf_take(&p);
      }
      kiln_strbuf_free(&p);
    }
    kiln_free(copy);
    kiln_strbuf_append(tried, "$PATH");
  }
  for (size_t i = 0; i < dirs->count; i++) {
    kiln_strbuf_t p = {0};
    kiln_strbuf_printf(&p, "%s/bin/ptxas", dirs->dirs[i]);
    if (is_executable(kiln_strbuf_cstr(&p))) return kiln_strbuf_take(&p);
    kiln_strbuf_printf(tried, "%s%s", tried->len ? ", " : "", kiln_strbuf_cstr(&p));
    kiln_strbuf_free(&p);
  }
  return NULL;
}

kiln_status kiln_nvptx_find_ptxas(const kiln_cuda_search_t *search, char **path) {
  kiln_cuda_dirs_t dirs;
  kiln_cuda_dirs_find(search, &dirs);
  kiln_strbuf_t tried = {0};
  *path = find_ptxas(&dirs, search ? search->exec_path : NULL, &tried);
  kiln_status s = NULL;
  if (!*path)
    s = kiln_status_make(KILN_UNAVAILABLE, "ptxas not found; tried: %s",
                         tried.len ? kiln_strbuf_cstr(&tried) : "(no candidates)");
  kiln_strbuf_free(&tried);
  kiln_cuda_dirs_free(&dirs);
  return s;
}

/* Writes the PTX into a private temp dir and runs `ptxas -arch=<arch> -o out.cubin in.ptx`.
 * On success *cubin gets the bytes (when wanted). *log gets ptxas's output. */
static kiln_status run_ptxas(const char *ptxas, const char *tmp, const char *ptx, size_t ptx_len,
                             const char *arch, void **cubin, size_t *cubin_size, char **log) {
  *log = NULL;
  if (cubin) *cubin = NULL;
  if (cubin_size) *cubin_size = 0;
  kiln_strbuf_t dir = {0};
  kiln_strbuf_printf(&dir, "%s/kiln-ptxas-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir.data)) {
    kiln_status s = kiln_status_make(KILN_UNAVAILABLE, "cannot create temp dir %s: %s", dir.data,
                                     strerror(errno));
    kiln_strbuf_free(&dir);
    return s;
  }
  kiln_strbuf_t in = {0}, outp = {0}, arch_opt = {0};
  kiln_strbuf_printf(&in, "%s/in.ptx", dir.data);
  kiln_strbuf_printf(&outp, "%s/out.cubin", dir.data);
  kiln_strbuf_printf(&arch_opt, "-arch=%s", arch);
  kiln_status s = NULL;
  FILE *f = fopen(in.data, "wb");
  if (!f || fwrite(ptx, 1, ptx_len, f) != ptx_len) {
    s = kiln_status_make(KILN_UNAVAILABLE, "cannot write %s: %s", in.data, strerror(errno));
  }
  if (f && fclose(f) != 0 && !s) s = kiln_status_make(KILN_UNAVAILABLE, "cannot write %s", in.data);
  if (!s) {
    const char *argv[] = {ptxas, arch_opt.data, "-o", outp.data, in.data, NULL};
    int code = -1;
    char *output = NULL;
    s = kiln_nvptx_run_tool(argv, &output, &code);
    if (!s && code != 0) {
      s = kiln_status_make(KILN_INVALID_ARGUMENT, "%s %s rejected the PTX (exit %d): %s", ptxas,
                           arch_opt.data, code, output && output[0] ? output : "(no output)");
    }
    if (output && output[0])
      *log = output;
    else
      kiln_free(output);
  }
  if (!s && cubin) {
    char *bytes = NULL;
    size_t n = 0;
    s = kiln_read_file(outp.data, &bytes, &n);
    if (s)
      s = kiln_status_annotate(s, "while reading the cubin ptxas wrote");
    else {
      *cubin = bytes;
      *cubin_size = n;
    }
  }
  unlink(in.data);
  unlink(outp.data);
  rmdir(dir.data);
  kiln_strbuf_free(&in);
  kiln_strbuf_free(&outp);
  kiln_strbuf_free(&arch_opt);
  kiln_strbuf_free(&dir);
  return s;
}

kiln_status kiln_ptxas_check(const char *ptx, const char *arch, char **log) {
  *log = NULL;
  if (!ptx) return KILN_ERR_INVALID("kiln_ptxas_check: NULL PTX");
  if (!arch || !arch[0]) arch = KILN_NVPTX_DEFAULT_ARCH;
  char *ptxas = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_nvptx_find_ptxas(NULL, &ptxas));
  kiln_status s = run_ptxas(ptxas, NULL, ptx, strlen(ptx), arch, NULL, NULL, log);
  kiln_free(ptxas);
  return s;
}

/* ---- PTX -> cubin ------------------------------------------------------------------------ */

static void result_init(kiln_nvptx_result_t *out) {
  memset(out, 0, sizeof *out);
}

void kiln_nvptx_result_free(kiln_nvptx_result_t *r) {
  if (!r) return;
  kiln_free(r->ptx);
  kiln_free(r->cubin);
  kiln_free(r->arch);
  kiln_free(r->cubin_log);
  kiln_free(r->libdevice_path);
  result_init(r);
}

static void append_log(kiln_nvptx_result_t *out, const char *tool, char *log) {
  if (!log) return;
  kiln_strbuf_t b = {0};
  if (out->cubin_log) kiln_strbuf_printf(&b, "%s\n", out->cubin_log);
  kiln_strbuf_printf(&b, "[%s]\n%s", tool, log);
  kiln_free(out->cubin_log);
  kiln_free(log);
  out->cubin_log = kiln_strbuf_take(&b);
}

/* Step 5: nvJitLink, else ptxas, else UNAVAILABLE. `arch` is resolved already. */
static kiln_status ptx_to_cubin(const char *ptx, size_t ptx_len, const char *arch,
                                kiln_cubin_via_t via, const kiln_cuda_search_t *cuda,
                                kiln_nvptx_result_t *out) {
  double t0 = kiln_clock_ms();
  kiln_cuda_dirs_t dirs;
  kiln_cuda_dirs_find(cuda, &dirs);
  kiln_status jit_failure = NULL; /* why nvJitLink did not produce the cubin */
  kiln_status s = NULL;
  bool done = false;
  if (via == KILN_CUBIN_VIA_AUTO || via == KILN_CUBIN_VIA_NVJITLINK) {
    const kiln_nvjitlink_t *lib = NULL;
    jit_failure = kiln_nvjitlink_load(&dirs, &lib);
    if (!jit_failure) {
      char *log = NULL;
      bool rejected = false;
      jit_failure = kiln_nvjitlink_ptx_to_cubin(lib, ptx, ptx_len, arch, &out->cubin,
                                                &out->cubin_size, &log, &rejected);
      append_log(out, "nvJitLink", log);
      if (!jit_failure) {
        out->method = KILN_CUBIN_METHOD_NVJITLINK;
        done = true;
      } else if (rejected) {
        /* ptxas is the same assembler; retrying would only repeat the error. */
        s = jit_failure;
        jit_failure = NULL;
        done = true;
      }
    }
    if (!done && via == KILN_CUBIN_VIA_NVJITLINK) {
      s = jit_failure;
      jit_failure = NULL;
      done = true;
    }
  }
  if (!done) {
    kiln_strbuf_t tried = {0};
    char *ptxas = find_ptxas(&dirs, cuda->exec_path, &tried);
    if (ptxas) {
      char *log = NULL;
      s = run_ptxas(ptxas, cuda->tmp_dir, ptx, ptx_len, arch, &out->cubin, &out->cubin_size, &log);
      append_log(out, "ptxas", log);
      if (!s)
        out->method = KILN_CUBIN_METHOD_PTXAS;
      else if (jit_failure)
        s = kiln_status_annotate(s, "after nvJitLink failed: %s", kiln_status_message(jit_failure));
      kiln_free(ptxas);
    } else {
      s = kiln_status_make(
          KILN_UNAVAILABLE,
          "no PTX assembler: %s; ptxas not found (tried: %s); the PTX is left for the driver "
          "to JIT-compile",
          jit_failure ? kiln_status_message(jit_failure) : "nvJitLink not tried",
          tried.len ? kiln_strbuf_cstr(&tried) : "(no candidates)");
    }
    kiln_strbuf_free(&tried);
  }
  kiln_status_free(jit_failure);
  kiln_cuda_dirs_free(&dirs);
  out->cubin_ms = kiln_clock_ms() - t0;
  return s;
}

kiln_status kiln_nvptx_ptx_to_cubin(const char *ptx, size_t ptx_len,
                                    const kiln_nvptx_options_t *opts, kiln_nvptx_result_t *out) {
  result_init(out);
  static const kiln_nvptx_options_t kDefaults = {0};
  if (!opts) opts = &kDefaults;
  if (!ptx) return KILN_ERR_INVALID("kiln_nvptx_ptx_to_cubin: NULL PTX");
  const char *arch = opts->arch && opts->arch[0] ? opts->arch : KILN_NVPTX_DEFAULT_ARCH;
  out->arch = kiln_strdup(arch);
  if (opts->cubin_via == KILN_CUBIN_VIA_SKIP) return NULL;
  return ptx_to_cubin(ptx, ptx_len, arch, opts->cubin_via, &opts->cuda, out);
}

/* ---- libdevice --------------------------------------------------------------------------- */

/* libdevice bytes are read once per path and cached for the process. The lazily loaded
 * module reads function bodies from them only while it is being linked (LLVMLinkModules2
 * destroys it), so an uncached copy can be freed right after the link. */
typedef struct libdevice_blob {
  char *path;
  char *bytes;
  size_t size;
} libdevice_blob_t;

#define KILN_LIBDEVICE_CACHE 4
static pthread_mutex_t libdevice_mutex = PTHREAD_MUTEX_INITIALIZER;
static libdevice_blob_t libdevice_cache[KILN_LIBDEVICE_CACHE];

/* *bytes is borrowed from the cache, or owned by the caller when *owned is set (cache full). */
static kiln_status libdevice_bytes(const char *path, char **bytes, size_t *size, bool *owned) {
  *owned = false;
  kiln_mutex_lock(&libdevice_mutex);
  size_t i = 0;
  for (; i < KILN_LIBDEVICE_CACHE && libdevice_cache[i].path; i++) {
    if (strcmp(libdevice_cache[i].path, path) == 0) {
      *bytes = libdevice_cache[i].bytes;
      *size = libdevice_cache[i].size;
      kiln_mutex_unlock(&libdevice_mutex);
      return NULL;
    }
  }
  kiln_status s = kiln_read_file(path, bytes, size);
  if (!s) {
    if (i < KILN_LIBDEVICE_CACHE) {
      libdevice_cache[i].path = kiln_strdup(path);
      libdevice_cache[i].bytes = *bytes;
      libdevice_cache[i].size = *size;
    } else {
      *owned = true;
    }
  }
  kiln_mutex_unlock(&libdevice_mutex);
  return s;
}

static bool module_calls_libdevice(LLVMModuleRef m) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    size_t len = 0;
    const char *name = LLVMGetValueName2(f, &len);
    if (LLVMIsDeclaration(f) && len > 5 && strncmp(name, "__nv_", 5) == 0) return true;
  }
  return false;
}

static size_t count_defined_functions(LLVMModuleRef m) {
  size_t n = 0;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f)) n++;
  return n;
}

/* Collects LLVM diagnostics (link errors would otherwise reach the default handler, which
 * exits the process on errors). */
typedef struct diag_sink {
  kiln_strbuf_t text;
  bool has_error;
} diag_sink_t;

static void diag_collect(LLVMDiagnosticInfoRef info, void *ctx) {
  diag_sink_t *sink = ctx;
  LLVMDiagnosticSeverity sev = LLVMGetDiagInfoSeverity(info);
  char *desc = LLVMGetDiagInfoDescription(info);
  if (sev == LLVMDSError) sink->has_error = true;
  if (sev == LLVMDSError || sev == LLVMDSWarning) {
    kiln_strbuf_printf(&sink->text, "%s%s: %s", sink->text.len ? "; " : "",
                       sev == LLVMDSError ? "error" : "warning", desc ? desc : "");
  }
  LLVMDisposeMessage(desc);
}

static kiln_status link_libdevice_bytes(LLVMModuleRef m, const char *path, const char *bytes,
                                        size_t size, bool eager, diag_sink_t *sink,
                                        kiln_nvptx_result_t *out);

/* Links the `__nv_*` functions `m` uses from libdevice (step 2). */
static kiln_status link_libdevice(LLVMModuleRef m, const kiln_cuda_search_t *cuda, bool eager,
                                  diag_sink_t *sink, kiln_nvptx_result_t *out) {
  kiln_cuda_dirs_t dirs;
  kiln_cuda_dirs_find(cuda, &dirs);
  kiln_strbuf_t tried = {0};
  char *path = kiln_cuda_dirs_find_file(&dirs, "nvvm/libdevice/libdevice.10.bc", &tried);
  kiln_cuda_dirs_free(&dirs);
  if (!path) {
    kiln_status s = kiln_status_make(KILN_UNAVAILABLE,
                                     "the module calls libdevice (__nv_*) functions but "
                                     "libdevice.10.bc was not found; tried: %s",
                                     tried.len ? kiln_strbuf_cstr(&tried) : "(no CUDA directory)");
    kiln_strbuf_free(&tried);
    return s;
  }
  kiln_strbuf_free(&tried);
  char *bytes = NULL;
  size_t size = 0;
  bool owned = false;
  kiln_status s = libdevice_bytes(path, &bytes, &size, &owned);
  if (s) {
    kiln_free(path);
    return s;
  }
  s = link_libdevice_bytes(m, path, bytes, size, eager, sink, out);
  if (owned) kiln_free(bytes);
  if (s)
    kiln_free(path);
  else
    out->libdevice_path = path;
  return s;
}

static kiln_status link_libdevice_bytes(LLVMModuleRef m, const char *path, const char *bytes,
                                        size_t size, bool eager, diag_sink_t *sink,
                                        kiln_nvptx_result_t *out) {
  LLVMContextRef ctx = LLVMGetModuleContext(m);
  LLVMMemoryBufferRef buf = LLVMCreateMemoryBufferWithMemoryRange(bytes, size, path, 0);
  LLVMModuleRef lib = NULL;
  LLVMBool failed;
  if (eager) {
    failed = LLVMParseBitcodeInContext2(ctx, buf, &lib);
    LLVMDisposeMemoryBuffer(buf);
  } else {
    /* On success the lazy module owns `buf`; on failure LLVM has already released it. */
    failed = LLVMGetBitcodeModuleInContext2(ctx, buf, &lib);
  }
  if (failed) return kiln_status_make(KILN_DATA_LOSS, "cannot read libdevice bitcode %s", path);
  /* Match the destination so the linker does not warn, and make every definition
   * linkonce_odr: the linker then brings in only what is referenced. */
  LLVMSetTarget(lib, LLVMGetTarget(m));
  LLVMSetDataLayout(lib, LLVMGetDataLayoutStr(m));
  for (LLVMValueRef f = LLVMGetFirstFunction(lib); f; f = LLVMGetNextFunction(f))
    if (!LLVMIsDeclaration(f)) LLVMSetLinkage(f, LLVMLinkOnceODRLinkage);
  size_t before = count_defined_functions(m);
  if (LLVMLinkModules2(m, lib) || sink->has_error) /* destroys `lib` */
    return kiln_status_make(KILN_INTERNAL, "linking libdevice %s failed: %s", path,
                            kiln_strbuf_cstr(&sink->text));
  out->libdevice_functions = count_defined_functions(m) - before;
  /* A `__nv_` name libdevice does not define would reach ptxas as an unresolved call. */
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    size_t len = 0;
    const char *name = LLVMGetValueName2(f, &len);
    if (LLVMIsDeclaration(f) && len > 5 && strncmp(name, "__nv_", 5) == 0 &&
        LLVMGetFirstUse(f) != NULL)
      return kiln_status_make(KILN_NOT_FOUND, "libdevice (%s) has no function %s", path, name);
  }
  return NULL;
}

/* Internal linkage for every defined function except the kernels, so that the optimizer
 * may inline and delete them (an `internalize` pass would drop the kernels too). */
static void internalize_non_kernels(LLVMModuleRef m) {
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f; f = LLVMGetNextFunction(f)) {
    if (LLVMIsDeclaration(f) || kiln_llvm_is_ptx_kernel(f)) continue;
    LLVMSetLinkage(f, LLVMInternalLinkage);
    LLVMSetVisibility(f, LLVMDefaultVisibility);
  }
}

/* ---- the compile pipeline ---------------------------------------------------------------- */

static void dump_module(const char *dir, const char *name, const char *stage, LLVMModuleRef m) {
  if (!dir) return;
  kiln_status s = kiln_backend_dump_module(dir, name, stage, m);
  if (s) {
    KILN_LOG_W("dump failed: %s", kiln_status_message(s));
    kiln_status_free(s);
  }
}

static kiln_status compile_module(LLVMModuleRef m, const kiln_nvptx_options_t *opts,
                                  LLVMTargetMachineRef tm, const char *arch, diag_sink_t *sink,
                                  kiln_nvptx_result_t *out) {
  const char *dump_dir = kiln_backend_dump_dir(opts->dump_dir);
  size_t id_len = 0;
  const char *name = opts->dump_name ? opts->dump_name : LLVMGetModuleIdentifier(m, &id_len);
  if (!name || !name[0]) name = "module";

  LLVMSetTarget(m, KILN_NVPTX_TRIPLE);
  LLVMTargetDataRef td = LLVMCreateTargetDataLayout(tm);
  char *dl = LLVMCopyStringRepOfTargetData(td);
  LLVMSetDataLayout(m, dl);
  LLVMDisposeMessage(dl);
  LLVMDisposeTargetData(td);
  dump_module(dump_dir, name, KILN_DUMP_STAGE_LLVM_INPUT, m);

  double t0 = kiln_clock_ms();
  if (module_calls_libdevice(m)) {
    KILN_RETURN_IF_ERROR(link_libdevice(m, &opts->cuda, opts->libdevice_eager, sink, out),
                         "while linking libdevice for %s", arch);
    LLVMContextRef ctx = LLVMGetModuleContext(m);
    static const char kFtz[] = "nvvm-reflect-ftz";
    if (!LLVMGetModuleFlag(m, kFtz, sizeof kFtz - 1)) {
      LLVMValueRef v = LLVMConstInt(LLVMInt32TypeInContext(ctx), opts->ftz ? 1 : 0, 0);
      LLVMAddModuleFlag(m, LLVMModuleFlagBehaviorOverride, kFtz, sizeof kFtz - 1,
                        LLVMValueAsMetadata(v));
    }
  }
  internalize_non_kernels(m);
  out->libdevice_ms = kiln_clock_ms() - t0;
  if (out->libdevice_path) dump_module(dump_dir, name, KILN_DUMP_STAGE_LLVM_LINKED, m);

  t0 = kiln_clock_ms();
  LLVMPassBuilderOptionsRef pbo = LLVMCreatePassBuilderOptions();
  const char *pipeline = opts->pipeline && opts->pipeline[0] ? opts->pipeline : "default<O3>";
  LLVMErrorRef err = LLVMRunPasses(m, pipeline, tm, pbo);
  LLVMDisposePassBuilderOptions(pbo);
  out->opt_ms = kiln_clock_ms() - t0;
  if (err) {
    kiln_status s = kiln_llvm_error_to_status(err, KILN_INVALID_ARGUMENT, "LLVMRunPasses");
    return kiln_status_annotate(s, "pipeline \"%s\"", pipeline);
  }
  dump_module(dump_dir, name, KILN_DUMP_STAGE_LLVM_OPT, m);

  t0 = kiln_clock_ms();
  kiln_status s = kiln_backend_emit_assembly(tm, m, false, &out->ptx, &out->ptx_size);
  out->ptx_ms = kiln_clock_ms() - t0;
  if (!s && sink->has_error)
    s = kiln_status_make(KILN_INTERNAL, "NVPTX code generation reported: %s",
                         kiln_strbuf_cstr(&sink->text));
  KILN_RETURN_IF_ERROR(s, "while emitting PTX for %s", arch);
  if (dump_dir) {
    kiln_status d =
        kiln_backend_dump_text(dump_dir, name, KILN_DUMP_STAGE_PTX, "ptx", out->ptx, out->ptx_size);
    if (d) {
      KILN_LOG_W("dump failed: %s", kiln_status_message(d));
      kiln_status_free(d);
    }
  }
  if (opts->cubin_via == KILN_CUBIN_VIA_SKIP) return NULL;
  return ptx_to_cubin(out->ptx, out->ptx_size, arch, opts->cubin_via, &opts->cuda, out);
}

kiln_status kiln_nvptx_compile(LLVMModuleRef m, const kiln_nvptx_options_t *opts,
                               kiln_nvptx_result_t *out) {
  result_init(out);
  static const kiln_nvptx_options_t kDefaults = {0};
  if (!opts) opts = &kDefaults;
  if (!m) return KILN_ERR_INVALID("kiln_nvptx_compile: NULL module");
  const char *arch = opts->arch && opts->arch[0] ? opts->arch : KILN_NVPTX_DEFAULT_ARCH;
  out->arch = kiln_strdup(arch);

  char *msg = NULL;
  if (LLVMVerifyModule(m, LLVMReturnStatusAction, &msg)) {
    kiln_status s =
        kiln_status_make(KILN_INVALID_ARGUMENT, "invalid LLVM module: %s", msg ? msg : "");
    LLVMDisposeMessage(msg);
    return s;
  }
  LLVMDisposeMessage(msg);
  bool has_kernel = false;
  for (LLVMValueRef f = LLVMGetFirstFunction(m); f && !has_kernel; f = LLVMGetNextFunction(f))
    has_kernel = !LLVMIsDeclaration(f) && kiln_llvm_is_ptx_kernel(f);
  if (!has_kernel)
    return KILN_ERR_INVALID(
        "the module defines no kernel: mark entry points with the PTX kernel calling "
        "convention (LLVMPTXKernelCallConv); nvvm.annotations metadata alone is ignored by "
        "LLVM 21+");

  LLVMTargetMachineRef tm = NULL;
  KILN_RETURN_IF_ERROR_PLAIN(kiln_nvptx_target_machine_create(arch, opts->features, &tm));

  LLVMModuleRef work = opts->keep_module ? LLVMCloneModule(m) : m;
  LLVMContextRef ctx = LLVMGetModuleContext(work);
  LLVMDiagnosticHandler old_handler = LLVMContextGetDiagnosticHandler(ctx);
  void *old_ctx = LLVMContextGetDiagnosticContext(ctx);
  diag_sink_t sink = {0};
  LLVMContextSetDiagnosticHandler(ctx, diag_collect, &sink);
  kiln_status s = compile_module(work, opts, tm, arch, &sink, out);
  LLVMContextSetDiagnosticHandler(ctx, old_handler, old_ctx);
  if (sink.text.len && !s) KILN_LOG_D("NVPTX diagnostics: %s", kiln_strbuf_cstr(&sink.text));
  kiln_strbuf_free(&sink.text);
  if (opts->keep_module) LLVMDisposeModule(work);
  LLVMDisposeTargetMachine(tm);
  return s;
}
