/* PLACEHOLDER (being written): the event slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_event(PJRT_Api *api) { (void)api; }
