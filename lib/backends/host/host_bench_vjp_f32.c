/* host_bench_vjp_f32.c - the bare VJP loop in float32. */
#define CLN_PRECISION 32
#include "host_bench_vjp.inc"
