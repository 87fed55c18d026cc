/* PLACEHOLDER (being written): the compile slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_compile(PJRT_Api *api) { (void)api; }
