/* PLACEHOLDER (being written): the plugin slots. */
#include "plugin/pjrt_internal.h"

void kiln_pjrt_fill_plugin(PJRT_Api *api) { (void)api; }

PJRT_Extension_Base *kiln_pjrt_extensions(void) { return NULL; }
