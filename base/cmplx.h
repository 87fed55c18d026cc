/* <complex.h> with C11's CMPLX(x, y) wherever the C library's header leaves it out (glibc
 * defines it for GCC 4.7 and later only, so clang does not get it there). */
#ifndef KILN_BASE_CMPLX_H_
#define KILN_BASE_CMPLX_H_

#include <complex.h>

#ifndef CMPLX
#define CMPLX(x, y) __builtin_complex((double)(x), (double)(y))
#endif

#endif /* KILN_BASE_CMPLX_H_ */
