/* host_math_f32.c - the host loops in float32. */
#define CLN_PRECISION 32
#include "host_math.inc"
