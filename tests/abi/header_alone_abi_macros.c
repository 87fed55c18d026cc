/* abi_macros.h compiles on its own: included first and alone (C11, -pedantic; also C++ in ctest).
 */
#include "kiln/abi_macros.h"
