/* host_reverse_f32.c - the host's reverse and tangent passes in float32. */
#define CLN_PRECISION 32
#include "host_reverse.inc"
#include "host_tangent.inc"
