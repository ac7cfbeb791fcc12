/* host_reverse_f32.c - the host's reverse pass in float32. */
#define CLN_PRECISION 32
#include "host_reverse.inc"
