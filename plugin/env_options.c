/* The environment into options (env_options.h): the one place below the programs' own code
 * that reads it. */
#include "plugin/env_options.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/disk_cache.h"
#include "base/host_pool.h"
#include "base/log.h"
#include "compiler/backend/kernel_cache.h"
#include "compiler/frontend/stablehlo_to_hlo.h"

/* $name when set and not empty, else NULL. */
static const char *env_str(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

/* $name set to something other than "" and "0". */
static bool env_flag(const char *name) {
  const char *v = env_str(name);
  return v && strcmp(v, "0") != 0;
}

/* $name as a positive count, else 0. */
static long env_count(const char *name) {
  const char *v = env_str(name);
  long n = v ? strtol(v, NULL, 10) : 0;
  return n > 0 ? n : 0;
}

/* ---- one compile ---- */

bool kiln_pjrt_strict_precision_from_env(void) {
  const char *e = env_str("KILN_ALLOW_EXCESS_PRECISION");
  if (e && (!strcmp(e, "0") || !strcmp(e, "false"))) return true;
  const char *x = env_str("XLA_FLAGS");
  const char *f = x ? strstr(x, "--xla_allow_excess_precision=") : NULL;
  if (f) {
    f += strlen("--xla_allow_excess_precision=");
    if (!strncmp(f, "false", 5) || !strncmp(f, "0", 1)) return true;
  }
  return false;
}

/* XLA_FLAGS holds --<flag>=true (or =1). */
static bool xla_flag_true(const char *flag) {
  const char *x = env_str("XLA_FLAGS");
  size_t n = strlen(flag);
  for (const char *f = x; f && (f = strstr(f, flag)); f += n) {
    bool starts = f == x || f[-1] == ' ' || f[-1] == '\t';
    if (starts && f[n] == '=' && (!strncmp(f + n + 1, "true", 4) || f[n + 1] == '1')) return true;
  }
  return false;
}

bool kiln_pjrt_deterministic_from_env(void) {
  return env_flag("KILN_DETERMINISTIC_OPS") || xla_flag_true("--xla_gpu_deterministic_ops") ||
         xla_flag_true("--xla_gpu_exclude_nondeterministic_ops");
}

void kiln_pjrt_cuda_search_from_env(kiln_cuda_search_t *o) {
  if (!o->dir) o->dir = env_str("KILN_CUDA_DIR");
  if (!o->home) o->home = env_str("CUDA_HOME");
  if (!o->path) o->path = env_str("CUDA_PATH");
  if (!o->exec_path) o->exec_path = env_str("PATH");
  if (!o->tmp_dir) o->tmp_dir = env_str("TMPDIR");
}

void kiln_pjrt_pass_options_from_env(kiln_pass_options_t *o) {
  if (!o->dump_dir) o->dump_dir = env_str("KILN_DUMP_TO");
  if (o->verify < 0) {
    const char *v = getenv("KILN_VERIFY_PASSES");
    if (v && *v) o->verify = strcmp(v, "0") != 0;
  }
  if (!o->disabled_passes) o->disabled_passes = env_str("KILN_DISABLE_PASSES");
  const char *lib = env_str("KILN_GEMM_LIBRARY");
  if (lib && strcmp(lib, "none") == 0) o->no_gemm_library = true;
}

void kiln_pjrt_codegen_options_from_env(kiln_codegen_compile_options_t *o) {
  if (!o->dump_dir) o->dump_dir = env_str("KILN_DUMP_TO");
  if (!o->strict_precision) o->strict_precision = kiln_pjrt_strict_precision_from_env();
  if (!o->deterministic) o->deterministic = kiln_pjrt_deterministic_from_env();
}

void kiln_pjrt_compile_options_from_env(kiln_compile_options_t *o, kiln_pass_options_t *passes) {
  if (!o->emit.dump_dir) o->emit.dump_dir = env_str("KILN_DUMP_TO");
  if (!o->command_buffer_min_run)
    o->command_buffer_min_run = (size_t)env_count("KILN_COMMAND_BUFFER_MIN_RUN");
  if (env_flag("KILN_DISABLE_COMMAND_BUFFERS")) o->no_command_buffers = true;
  kiln_host_jit_options_t *j = &o->emit.host_jit;
  if (!j->cpu) j->cpu = env_str("KILN_HOST_CPU");
  if (!j->extra_features) j->extra_features = env_str("KILN_HOST_CPU_FEATURES");
  if (!j->pipeline) j->pipeline = env_str("KILN_HOST_LLVM_PIPELINE");
  if (env_flag("KILN_HOST_ORC_LINK")) j->orc_link = true;
  if (!o->emit.strict_precision) o->emit.strict_precision = kiln_pjrt_strict_precision_from_env();
  if (!o->emit.deterministic) o->emit.deterministic = kiln_pjrt_deterministic_from_env();
  kiln_pjrt_cuda_search_from_env(&o->emit.cuda);
  if (!o->passes && passes) {
    memset(passes, 0, sizeof(*passes));
    passes->verify = -1;
    passes->dump_dir = o->emit.dump_dir;
    kiln_pjrt_pass_options_from_env(passes);
    o->passes = passes;
  }
}

/* ---- the process ---- */

void kiln_pjrt_runtime_options_from_env(kiln_runtime_options_t *o) {
  memset(o, 0, sizeof(*o));
  const char *alloc = env_str("KILN_ALLOCATOR");
  o->plain_allocator = alloc && !strcmp(alloc, "plain");
  if (alloc && !o->plain_allocator && strcmp(alloc, "bfc"))
    KILN_LOG_W("KILN_ALLOCATOR=%s is not `bfc` or `plain`; using the caching allocator (bfc)",
               alloc);
  o->command_buffer_cache_size = (size_t)env_count("KILN_COMMAND_BUFFER_CACHE_SIZE");
  o->no_command_buffers = env_flag("KILN_DISABLE_COMMAND_BUFFERS");
  o->cuda_driver = env_str("KILN_CUDA_DRIVER");
  o->nccl_library = env_str("KILN_NCCL_LIBRARY");
  o->mpi_library = env_str("KILN_MPI_LIBRARY");
  o->host_blas = env_str("KILN_HOST_BLAS");
  o->host_epilogue_isa = env_str("KILN_HOST_EPILOGUE_ISA");
  o->host_gemm_half = env_str("KILN_HOST_GEMM_HALF");
  o->host_gemm_f32 = env_str("KILN_HOST_GEMM_F32");
}

void kiln_pjrt_process_options_reread_env(void) {
  kiln_log_level_t level = KILN_LOG_WARNING;
  kiln_log_parse_level(env_str("KILN_LOG"), &level); /* anything else: warning, as before */
  kiln_log_set_level(level);
  kiln_runtime_options_t ro;
  kiln_pjrt_runtime_options_from_env(&ro);
  kiln_runtime_options_set(&ro);
  kiln_host_pool_set_default_workers((int)env_count("KILN_HOST_THREADS"));
  const char *max = env_str("KILN_CACHE_MAX_BYTES");
  int64_t bytes = -1;
  if (max && !kiln_disk_cache_parse_size(max, &bytes))
    KILN_LOG_W(
        "KILN_CACHE_MAX_BYTES=%s is not a size (bytes, or a number with K/M/G); using "
        "1G",
        max);
  kiln_disk_cache_set_max_bytes(bytes);
  const char *mem = env_str("KILN_KERNEL_MEMORY_CACHE_BYTES");
  long long mem_bytes = mem ? strtoll(mem, NULL, 10) : -1;
  kiln_kernel_cache_set_memory_limit(mem && mem_bytes < 0 ? 0 : mem_bytes);
  const char *dump = env_str("KILN_STABLEHLO_DUMP");
  kiln_stablehlo_set_dump(!dump                  ? KILN_STABLEHLO_DUMP_NONE
                          : !strcmp(dump, "all") ? KILN_STABLEHLO_DUMP_ALL
                                                 : KILN_STABLEHLO_DUMP_ON_ERROR);
  kiln_ffi_registry_set_default_spec(env_str("KILN_FFI_HANDLERS"), "KILN_FFI_HANDLERS");
}

static pthread_once_t g_process_once = PTHREAD_ONCE_INIT;

void kiln_pjrt_process_options_from_env(void) {
  kiln_once(&g_process_once, kiln_pjrt_process_options_reread_env);
}

bool kiln_pjrt_mpi_launched(void) {
  return env_str("OMPI_COMM_WORLD_SIZE") != NULL;
}

kiln_status kiln_pjrt_ffi_registry_load_env(kiln_ffi_registry_t *r, const char *var) {
  if (!var) return KILN_ERR_INVALID("kiln_pjrt_ffi_registry_load_env: NULL variable name");
  return kiln_ffi_registry_load_named_spec(r, env_str(var), var);
}
