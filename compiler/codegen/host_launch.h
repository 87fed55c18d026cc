/* The host kernel ABI and worker pool live in base/host_pool.h (the runtime's host device
 * uses them too, and may not depend on codegen); codegen includes them from here. */
#ifndef KILN_COMPILER_CODEGEN_HOST_LAUNCH_H_
#define KILN_COMPILER_CODEGEN_HOST_LAUNCH_H_

#include "base/host_pool.h"

#endif /* KILN_COMPILER_CODEGEN_HOST_LAUNCH_H_ */
