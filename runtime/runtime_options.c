/* The runtime's process-wide options (runtime_options.h). */
#include "runtime/runtime_options.h"

#include <pthread.h>
#include <string.h>

#include "base/alloc.h"

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static kiln_runtime_options_t g_options;

/* Strings of every set are kept (a set happens a few times per process at most): a reader
 * holding a pointer from kiln_runtime_options never sees it freed. */
typedef struct kept {
  struct kept *next;
  char text[];
} kept_t;
static kept_t *g_kept;

static const char *keep(const char *s) {
  if (!s || !*s) return NULL;
  size_t n = strlen(s) + 1;
  kept_t *k = kiln_malloc(sizeof(*k) + n);
  memcpy(k->text, s, n);
  k->next = g_kept;
  g_kept = k;
  return k->text;
}

void kiln_runtime_options_set(const kiln_runtime_options_t *o) {
  kiln_runtime_options_t c = {0};
  if (o) c = *o;
  kiln_mutex_lock(&g_mu);
  c.cuda_driver = keep(c.cuda_driver);
  c.nccl_library = keep(c.nccl_library);
  c.mpi_library = keep(c.mpi_library);
  c.host_blas = keep(c.host_blas);
  c.host_epilogue_isa = keep(c.host_epilogue_isa);
  c.host_gemm_half = keep(c.host_gemm_half);
  c.host_gemm_f32 = keep(c.host_gemm_f32);
  g_options = c;
  kiln_mutex_unlock(&g_mu);
}

kiln_runtime_options_t kiln_runtime_options(void) {
  kiln_mutex_lock(&g_mu);
  kiln_runtime_options_t o = g_options;
  kiln_mutex_unlock(&g_mu);
  return o;
}
