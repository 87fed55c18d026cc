/* PLACEHOLDER (being written): the executable slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_executable(PJRT_Api *api) { (void)api; }
