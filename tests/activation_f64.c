/* activation_f64.c - the double instance of cl/cln_activation.h, as plain functions for
 * tests/test_activation.c and tools/bench_activation.c (one translation unit per precision,
 * as the host backend does). activation_f32.c is the same file for float. */
#define CLN_PRECISION 64
#include "cln_activation.h"

#include <stddef.h>

/* The array loop is built for AVX2 as well as the baseline where the toolchain can dispatch at
 * load time. AVX2 without FMA: contraction stays off, so both clones give the same bits. */
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__) && !defined(__clang__)
#define ACTW_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define ACTW_CLONES
#endif

double act_f64(int act, double x);
double exp_f64(double x);
double log1p01_f64(double u);
void act_array_f64(int act, const double *x, double *y, size_t n);

double act_f64(int act, double x)
{
    return cln_activate(act, x);
}

double exp_f64(double x)
{
    return cln_exp(x);
}

double log1p01_f64(double u)
{
    return cln_log1p(u);
}

/* One loop per activation, the switch outside, so that each loop vectorises. */
#define ACTW_LOOP(fn)                                                                              \
    for (size_t i = 0; i < n; i++)                                                                 \
        y[i] = fn(x[i]);                                                                           \
    break

ACTW_CLONES void act_array_f64(int act, const double *restrict x, double *restrict y, size_t n)
{
    switch (act) {
    case CLN_ACT_RELU:
        ACTW_LOOP(cln_relu);
    case CLN_ACT_TANH:
        ACTW_LOOP(cln_tanh);
    case CLN_ACT_SIGMOID:
        ACTW_LOOP(cln_sigmoid);
    case CLN_ACT_SOFTPLUS:
        ACTW_LOOP(cln_softplus);
    case CLN_ACT_SILU:
        ACTW_LOOP(cln_silu);
    case CLN_ACT_GELU:
        ACTW_LOOP(cln_gelu);
    default:
        ACTW_LOOP(cln_identity);
    }
}
