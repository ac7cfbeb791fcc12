/* host_act_f64.c - bias + activation on interleaved rows in float64. */
#define CLN_PRECISION 64
#include "host_act.inc"
