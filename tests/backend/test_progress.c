/* test_progress.c - the progress report of clnode_solve (clnode_solve_options.progress): it comes
 * while the solve runs (at most once a second), reports the fraction of [t0, t1] covered by the
 * trajectories, and a non-zero return cancels the solve. Run on host:openblas, whose batch is
 * padded to whole blocks of rows: the padding rows must not count as trajectories. Skipped (77)
 * without OpenBLAS. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"
#include "test_device.h"

typedef struct report {
    int calls;
    size_t active, batch;
    double fraction;
    long steps;
} report;

/* Records the first report and cancels. */
static int on_progress(void *user, size_t active, size_t batch, double fraction, long steps)
{
    report *r = user;
    r->calls++;
    r->active = active;
    r->batch = batch;
    r->fraction = fraction;
    r->steps = steps;
    return 1;
}

static clnode_context *ctx;

/* Constant steps of 1e-4 over [0, 1e4] (10^8 steps) on 3 trajectories: the report after a second
 * finds them part of the way, and cancelling ends the solve there. */
static void test_progress_and_cancel(void **state)
{
    (void)state;
    clnode_model *model = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &model), CLNODE_OK);
    const size_t B = 3, N = clnode_model_dim(model);
    double *y0 = calloc(B * N, sizeof(double));
    assert_non_null(y0);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.constant_step = 1;
    o.t1 = 1e4;
    o.dt0 = 1e-4;
    o.max_steps = INT32_MAX;
    o.precision_guard = CLNODE_GUARD_OFF;
    report r = {0};
    o.progress = on_progress;
    o.progress_user = &r;
    clnode_solution *sol = NULL;
    const clnode_status st = clnode_solve(ctx, model, &o, TEST_PROBLEM(B, y0), &sol);
    print_message("  %d report(s): %zu of %zu active, fraction %.3g after %ld steps\n", r.calls,
                  r.active, r.batch, r.fraction, r.steps);
    assert_int_equal(st, CLNODE_ERR_CANCELLED);
    assert_string_equal(clnode_context_last_error(ctx), "cancelled by the progress callback");
    assert_null(sol);
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.batch, B);
    assert_int_equal(r.active, B);
    assert_true(r.steps > 0);
    /* the fraction is that of the steps taken (constant steps: steps * dt0 / t1), not 0 */
    const double expected = (double)r.steps * o.dt0 / o.t1;
    assert_true(r.fraction > 0.5 * expected && r.fraction <= 1.01 * expected);
    free(y0);
    clnode_model_destroy(&model);
}

int main(void)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host:openblas";
    if (clnode_context_create(&co, &ctx) != CLNODE_OK) {
        return test_device_absent("host:openblas", "no context on it");
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_and_cancel),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&ctx);
    return rc;
}
