/* PLACEHOLDER (being written): the client slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_client(PJRT_Api *api) { (void)api; }
