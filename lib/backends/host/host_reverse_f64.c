/* host_reverse_f64.c - the host's reverse and tangent passes in float64. */
#define CLN_PRECISION 64
#include "host_reverse.inc"
#include "host_tangent.inc"
