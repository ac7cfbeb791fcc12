/* host_mlp_f64.c - the fused host pass in float64. */
#define CLN_PRECISION 64
#include "host_mlp.inc"
