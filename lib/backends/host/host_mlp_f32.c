/* host_mlp_f32.c - the fused host pass in float32. */
#define CLN_PRECISION 32
#include "host_mlp.inc"
