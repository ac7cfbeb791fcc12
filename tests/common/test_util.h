/* test_util.h - what the cmocka tests share: one deterministic generator (test_lcg), one
 * description of a model from arrays (test_mlp_desc) and one closeness check that says, when it
 * fails, both values, their difference and the tolerance (assert_close, assert_close_lt).
 * Header-only; include it after <cmocka.h>'s prerequisites, as every test does. */
#ifndef CLNODE_TEST_UTIL_H
#define CLNODE_TEST_UTIL_H

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "clnode.h"

/* The next value of the linear congruential generator of state *x (Numerical Recipes' constants):
 * *x = *x * 1664525 + 1013904223 (mod 2^32), then its top 24 bits as a double in [-1, 1) on a grid
 * of 2^-23. Every step is exact, so a scaled value (0.5 * test_lcg(x), 0.6 * test_lcg(x)) has the
 * bits of the same scaling written in any order of exact operations. */
static inline double test_lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return (double)(*x >> 8) / 8388608.0 - 1.0;
}

/* The description of a model from arrays: num_layers layers of widths sizes[0..num_layers],
 * weights[l] (sizes[l+1] x sizes[l]) and biases (NULL: none, or one array per layer, NULL: none);
 * every other field keeps its default (identity activations, no time input, no conditioning
 * inputs): set those on the result. */
static inline clnode_model_desc test_mlp_desc(size_t num_layers, const size_t *sizes,
                                              const double *const *weights,
                                              const double *const *biases)
{
    clnode_model_desc d;
    clnode_model_default_desc(&d);
    d.num_layers = num_layers;
    d.sizes = sizes;
    d.weights = weights;
    d.biases = biases;
    return d;
}

/* Fails the running test unless |a - b| <= atol + rtol * |b| (with rtol 0: |a - b| <= atol, the
 * tolerance as given), naming both expressions with their values, the difference and the
 * tolerance. A NaN on either side fails. Each argument is evaluated once. */
#define assert_close(a, b, rtol, atol)                                                             \
    do {                                                                                           \
        const double a_ = (a), b_ = (b), rtol_ = (rtol), atol_ = (atol);                           \
        const double tol_ = rtol_ == 0 ? atol_ : atol_ + rtol_ * fabs(b_);                         \
        if (!(fabs(a_ - b_) <= tol_))                                                              \
            fail_msg("%s = %.17g and %s = %.17g differ by %.17g, more than %.17g "                 \
                     "(|a - b| <= atol + rtol * |b|: atol %.3g, rtol %.3g)",                       \
                     #a, a_, #b, b_, fabs(a_ - b_), tol_, atol_, rtol_);                           \
    } while (0)

/* Fails the running test unless |a - b| < tol (strictly), with the same message. */
#define assert_close_lt(a, b, tol)                                                                 \
    do {                                                                                           \
        const double a_ = (a), b_ = (b), tol_ = (tol);                                             \
        if (!(fabs(a_ - b_) < tol_))                                                               \
            fail_msg("%s = %.17g and %s = %.17g differ by %.17g, not less than %.17g", #a, a_, #b, \
                     b_, fabs(a_ - b_), tol_);                                                     \
    } while (0)

#endif
