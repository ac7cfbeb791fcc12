/* test_cancel.c - cancelling a running solve: the cancel callback is polled between groups of
 * steps from the first group on (so a solve of a few milliseconds can be stopped), a non-zero
 * answer ends the solve with CLNODE_ERR_CANCELLED and nothing stored, and the context then solves
 * as before; a callback that never cancels changes nothing. The device is the first argument
 * ("host", "opencl"); an absent device skips (77). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_device.h"

static clnode_context *g_ctx;
static const char *g_device = "host";

typedef struct poll_state {
    long calls;
    long cancel_at; /* cancel on this call (1-based); 0: never */
} poll_state;

static int on_cancel(void *user)
{
    poll_state *p = user;
    ++p->calls;
    return p->cancel_at > 0 && p->calls >= p->cancel_at;
}

/* The seed problem; `tight`: in fp64 at rtol 1e-9, a few hundred steps (several step groups on
 * every device). */
static clnode_status seed_solve(poll_state *p, size_t batch, int tight, clnode_solution **out)
{
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(g_ctx, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.save_steps = 1;
    if (tight) {
        o.precision = CLNODE_FP64;
        o.rtol = 1e-9;
        o.atol = 1e-9;
    }
    if (p) {
        o.cancel = on_cancel;
        o.cancel_user = p;
    }
    double y0[20] = {0};
    *out = NULL;
    clnode_status st = clnode_solve(g_ctx, m, &o, batch, y0, out);
    clnode_model_destroy(&m);
    return st;
}

static void test_default_is_null(void **state)
{
    (void)state;
    clnode_solve_options o;
    memset(&o, 0xff, sizeof o);
    clnode_solve_default_options(&o);
    assert_null(o.cancel);
    assert_null(o.cancel_user);
}

static void test_cancel_stops(void **state)
{
    (void)state;
    for (long at = 1; at <= 3; ++at) {
        poll_state p = {0, at};
        clnode_solution *s = (clnode_solution *)&p; /* must be overwritten with NULL */
        assert_int_equal(seed_solve(&p, 2, at > 1, &s), CLNODE_ERR_CANCELLED);
        assert_null(s);
        assert_int_equal(p.calls, at); /* no poll after the answer */
        assert_non_null(strstr(clnode_context_last_error(g_ctx), "cancelled"));
        assert_string_equal(clnode_status_name(CLNODE_ERR_CANCELLED), "CLNODE_ERR_CANCELLED");
    }
}

static void test_never_cancelling_changes_nothing(void **state)
{
    (void)state;
    poll_state p = {0, 0};
    clnode_solution *a = NULL, *b = NULL;
    assert_int_equal(seed_solve(&p, 2, 0, &a), CLNODE_OK); /* also: usable after a cancel */
    assert_int_equal(seed_solve(NULL, 2, 0, &b), CLNODE_OK);
    assert_true(p.calls >= 1); /* polled even in this 14-step solve */
    for (size_t t = 0; t < 2; ++t) {
        clnode_trajectory_stats sa, sb;
        assert_int_equal(clnode_solution_stats(a, t, &sa), CLNODE_OK);
        assert_int_equal(clnode_solution_stats(b, t, &sb), CLNODE_OK);
        assert_int_equal(sa.result, CLNODE_RESULT_SUCCESS);
        assert_int_equal(sa.num_steps, sb.num_steps);
        assert_memory_equal(clnode_solution_y_final(a, t), clnode_solution_y_final(b, t),
                            10 * sizeof(double));
    }
    clnode_solution_destroy(&a);
    clnode_solution_destroy(&b);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open(argc, argv, &g_device, NULL, NULL, &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_null),
        cmocka_unit_test(test_cancel_stops),
        cmocka_unit_test(test_never_cancelling_changes_nothing),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
