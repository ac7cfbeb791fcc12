/* test_problem.h - the problem of a batch for the tests' solves: test_problem (a value to set
 * per-trajectory fields on), TEST_PROBLEM (a pointer for a call's argument) and test_batch (such
 * a value's pointer with its batch and y0 set). Header-only; needs
 * nothing but clnode.h, so that tests without cmocka use it too. */
#ifndef CLNODE_TEST_PROBLEM_H
#define CLNODE_TEST_PROBLEM_H

#include <stddef.h>

#include "clnode.h"

/* The problem of `batch` trajectories from y0 (batch x dim, row-major); every other field keeps its
 * default (no per-trajectory arrays, no save times): set those on the result. */
static inline clnode_problem test_problem(size_t batch, const double *y0)
{
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = batch;
    p.y0 = y0;
    return p;
}

/* The same as a pointer to a compound literal, for a call's argument: the problem lives until the
 * end of the enclosing block. Variadic so that y0 may be a compound literal itself. */
#define TEST_PROBLEM(batch_, ...)                                                                  \
    (&(clnode_problem){                                                                            \
        .struct_size = sizeof(clnode_problem), .batch = (batch_), .y0 = (__VA_ARGS__)})

/* *p with `batch` trajectories from y0, its other fields as they are: a call's argument for a
 * problem that carries per-trajectory arrays or save times. Returns p. */
static inline const clnode_problem *test_batch(clnode_problem *p, size_t batch, const double *y0)
{
    p->batch = batch;
    p->y0 = y0;
    return p;
}

/* A copy of model m with the output scale `scale` (n values: 1, or one per component; NULL: none)
 * and everything else as m has it (layers, activations, time and conditioning inputs), in *out.
 * Returns the status of clnode_model_create. */
static inline clnode_status test_model_scaled(clnode_context *ctx, const clnode_model *m,
                                              const double *scale, size_t n, clnode_model **out)
{
    size_t L = clnode_model_num_layers(m), sizes[65];
    const double *ws[64], *bs[64];
    if (L > 64)
        return CLNODE_ERR_INVALID_ARGUMENT;
    sizes[0] = clnode_model_layer_in(m, 0);
    for (size_t l = 0; l < L; ++l) {
        sizes[l + 1] = clnode_model_layer_out(m, l);
        ws[l] = clnode_model_weight(m, l);
        bs[l] = clnode_model_bias(m, l);
    }
    clnode_model_desc d;
    clnode_model_default_desc(&d);
    d.num_layers = L;
    d.sizes = sizes;
    d.weights = ws;
    d.biases = bs;
    d.activation = clnode_model_activation(m);
    d.final_activation = clnode_model_final_activation(m);
    d.time_input = clnode_model_time_input(m);
    d.num_inputs = clnode_model_num_inputs(m);
    d.out_scale = scale;
    d.out_scale_size = scale ? n : 0;
    return clnode_model_create(ctx, &d, out);
}

/* A small model of the forms the front ends solve: time input, two conditioning inputs and a scalar
 * output scale `scale`, layers 6 -> 8 -> 3 with activation `act` between them and fixed weights
 * and biases (N = 3). NULL when the library refuses it. */
static inline clnode_model *test_forms_model(clnode_context *ctx, clnode_activation act,
                                             double scale)
{
    double w0[8 * 6], w1[3 * 8], b0[8], b1[3];
    for (size_t i = 0; i < 8 * 6; ++i)
        w0[i] = 0.1 * (double)((i * 7) % 11) - 0.5;
    for (size_t i = 0; i < 3 * 8; ++i)
        w1[i] = 0.1 * (double)((i * 5) % 9) - 0.4;
    for (size_t i = 0; i < 8; ++i)
        b0[i] = 0.05 * (double)i - 0.2;
    for (size_t i = 0; i < 3; ++i)
        b1[i] = 0.1 * (double)i;
    const size_t sizes[3] = {6, 8, 3};
    const double *ws[2] = {w0, w1}, *bs[2] = {b0, b1};
    clnode_model_desc d;
    clnode_model_default_desc(&d);
    d.num_layers = 2;
    d.sizes = sizes;
    d.weights = ws;
    d.biases = bs;
    d.activation = act;
    d.time_input = 1;
    d.num_inputs = 2;
    d.out_scale = &scale;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    return clnode_model_create(ctx, &d, &m) == CLNODE_OK ? m : NULL;
}

#endif /* CLNODE_TEST_PROBLEM_H */
