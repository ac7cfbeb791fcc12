/* test_solution.h - the tests' one comparison of two trajectories bit for bit
 * (test_assert_same_row): what the solver's guarantees say stays the same whatever the batch,
 * compaction or the saved-steps room. Header-only; include it after <cmocka.h>. */
#ifndef CLNODE_TEST_SOLUTION_H
#define CLNODE_TEST_SOLUTION_H

#include <string.h>

#include "clnode.h"

/* Fails the running test unless trajectory b of a and trajectory c_b of c agree bit for bit: the
 * stats (steps, accepted steps, result, t_final, and with `rhs` the vector-field evaluations), the
 * final state and every kind of saved point. `what` names the comparison in the message ("a" is
 * the trajectory under test, "the reference" c's). */
static inline void test_assert_same_row(const clnode_solution *a, size_t b,
                                        const clnode_solution *c, size_t c_b, const char *what,
                                        int rhs)
{
    const size_t N = clnode_solution_dim(a);
    clnode_trajectory_stats sa, sc;
    assert_int_equal(clnode_solution_stats(a, b, &sa), CLNODE_OK);
    assert_int_equal(clnode_solution_stats(c, c_b, &sc), CLNODE_OK);
    if (sa.num_steps != sc.num_steps || sa.num_accepted != sc.num_accepted ||
        sa.result != sc.result || memcmp(&sa.t_final, &sc.t_final, sizeof(double)) != 0)
        fail_msg("%s, trajectory %zu: %ld steps (%ld accepted), %s, t %.17g; the reference %ld "
                 "(%ld), %s, t %.17g",
                 what, b, sa.num_steps, sa.num_accepted, clnode_result_name(sa.result), sa.t_final,
                 sc.num_steps, sc.num_accepted, clnode_result_name(sc.result), sc.t_final);
    if (rhs && sa.num_rhs_evals != sc.num_rhs_evals)
        fail_msg("%s, trajectory %zu: %ld vector-field evaluations, the reference %ld", what, b,
                 sa.num_rhs_evals, sc.num_rhs_evals);
    if (memcmp(clnode_solution_y_final(a, b), clnode_solution_y_final(c, c_b), N * sizeof(double)))
        fail_msg("%s, trajectory %zu: final states differ", what, b);
    for (int k = CLNODE_SAVE_T0; k <= CLNODE_SAVE_T1; ++k) {
        size_t na, nc;
        const double *ta, *ya, *tc, *yc;
        assert_int_equal(clnode_solution_saved(a, b, (clnode_save_kind)k, &na, &ta, &ya),
                         CLNODE_OK);
        assert_int_equal(clnode_solution_saved(c, c_b, (clnode_save_kind)k, &nc, &tc, &yc),
                         CLNODE_OK);
        if (na != nc)
            fail_msg("%s, trajectory %zu, saved kind %d: %zu points, the reference %zu", what, b, k,
                     na, nc);
        for (size_t i = 0; i < na; ++i)
            if (memcmp(ta + i, tc + i, sizeof(double)) ||
                memcmp(ya + i * N, yc + i * N, N * sizeof(double)))
                fail_msg("%s, trajectory %zu, saved kind %d: point %zu of %zu differs (t %.17g, "
                         "the reference %.17g)",
                         what, b, k, i, na, ta[i], tc[i]);
    }
}

#endif /* CLNODE_TEST_SOLUTION_H */
