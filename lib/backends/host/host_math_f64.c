/* host_math_f64.c - the host loops in float64. */
#define CLN_PRECISION 64
#include "host_math.inc"
