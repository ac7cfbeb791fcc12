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

#endif /* CLNODE_TEST_PROBLEM_H */
