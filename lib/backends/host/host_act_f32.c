/* host_act_f32.c - bias + activation on interleaved rows in float32. */
#define CLN_PRECISION 32
#include "host_act.inc"
