/* PLACEHOLDER (being written): the device slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_device(PJRT_Api *api) { (void)api; }
