/* test_adopt.h - what the tests of contexts on an application's objects share
 * (test_opencl_adopt.c, test_cuda_adopt.c): the seed problem solved on a context, and the
 * comparison of two such solves. Include after <cmocka.h> and test_problem.h. */
#ifndef CLNODE_TEST_ADOPT_H
#define CLNODE_TEST_ADOPT_H

#include "clnode.h"

/* The seed problem (10 components, from y0 = 0) on `batch` <= 2 trajectories, solved on ctx. */
static inline clnode_solution *test_seed_solve(clnode_context *ctx, size_t batch)
{
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    double y0[20] = {0};
    clnode_solution *s = NULL;
    clnode_status st = clnode_solve(ctx, m, &o, TEST_PROBLEM(batch, y0), &s);
    if (st != CLNODE_OK)
        fail_msg("solve: %s", clnode_context_last_error(ctx));
    clnode_model_destroy(&m);
    return s;
}

/* Fails unless every trajectory of two test_seed_solve solutions of `batch` succeeded in the same
 * number of steps and ended on the same bits. */
static inline void test_assert_same_seed(const clnode_solution *s, const clnode_solution *ref,
                                         size_t batch)
{
    for (size_t b = 0; b < batch; ++b) {
        clnode_trajectory_stats a, r;
        assert_int_equal(clnode_solution_stats(s, b, &a), CLNODE_OK);
        assert_int_equal(clnode_solution_stats(ref, b, &r), CLNODE_OK);
        assert_int_equal(a.result, CLNODE_RESULT_SUCCESS);
        assert_int_equal(a.num_steps, r.num_steps);
        assert_memory_equal(clnode_solution_y_final(s, b), clnode_solution_y_final(ref, b),
                            10 * sizeof(double));
    }
}

#endif /* CLNODE_TEST_ADOPT_H */
