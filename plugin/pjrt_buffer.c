/* PLACEHOLDER (being written): the buffer slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_buffer(PJRT_Api *api) { (void)api; }
