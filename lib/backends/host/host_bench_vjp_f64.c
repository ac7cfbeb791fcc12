/* host_bench_vjp_f64.c - the bare VJP loop in float64. */
#define CLN_PRECISION 64
#include "host_bench_vjp.inc"
