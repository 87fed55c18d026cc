/* pjrt_c_api.h compiles on its own: included first and alone (C11, -pedantic; also C++ in ctest).
 */
#include "kiln/pjrt_c_api.h"
