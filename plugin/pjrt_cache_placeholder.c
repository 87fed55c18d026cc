/* TEMPORARY (helper pcore): the compile cache's functions until pjrt_executable.c (helper
 * pexec) defines them. Delete this file once that lands on main. */
#include "plugin/pjrt_executable.h"

kiln_status kiln_pjrt_compile_cache_create(const kiln_pjrt_client_options_t *opts,
                                           kiln_pjrt_compile_cache_t **out) {
  (void)opts;
  *out = NULL;
  return NULL;
}

void kiln_pjrt_compile_cache_destroy(kiln_pjrt_compile_cache_t *c) { (void)c; }
