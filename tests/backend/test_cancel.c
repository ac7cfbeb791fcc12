/* test_cancel.c - cancelling a running solve: the cancel callback is polled between groups of
 * steps from the first group on (so a solve of a few milliseconds can be stopped), a non-zero
 * answer ends the solve with CLNODE_ERR_CANCELLED and nothing stored, and the context then solves
 * as before; a callback that never cancels changes nothing. The certificate's re-solves take the
 * caller's progress and cancel callbacks, and none starts once cancel has asked to stop. The
 * reverse pass polls it between its groups of blocks, and reports its progress there. The
 * device is the first argument ("host", "opencl"); an absent device skips (77). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"
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
    clnode_status st = clnode_solve(g_ctx, m, &o, TEST_PROBLEM(batch, y0), out);
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

/* ---- the reverse pass (clnode/gradient.h): polled between groups of blocks ---- */

/* The reverse pass of a kept seed solve of `batch` trajectories (cotangent 1 at t1), on the host;
 * p: the cancel callback's state (NULL: none). */
static clnode_status seed_gradient(poll_state *p, size_t batch, clnode_gradient **out)
{
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(g_ctx, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.keep_tape = 1;
    double *y0 = test_calloc(batch * 10, sizeof(double));
    for (size_t i = 0; i < batch * 10; ++i)
        y0[i] = 0.01 * (double)(i % 7);
    clnode_solution *s = NULL;
    assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(batch, y0), &s), CLNODE_OK);
    double *cot = test_calloc(batch * 10, sizeof(double));
    for (size_t i = 0; i < batch * 10; ++i)
        cot[i] = 1.0;
    clnode_gradient_options go;
    clnode_gradient_default_options(&go);
    if (p) {
        go.cancel = on_cancel;
        go.cancel_user = p;
    }
    *out = (clnode_gradient *)p; /* must be overwritten */
    const clnode_status st = clnode_gradient_compute(g_ctx, m, &go, s, 1, cot, out);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    test_free(y0);
    test_free(cot);
    return st;
}

/* More than one group of blocks: polled after the first, and cancelled there with nothing stored;
 * a callback that never cancels gives the bits of none. */
static void test_gradient_cancel(void **state)
{
    (void)state;
    if (strncmp(g_device, "host", 4) != 0)
        skip(); /* the reverse pass runs on the host */
    const size_t batch = 17 * CLNODE_GRADIENT_BLOCK + 1; /* 18 blocks: two groups of 16 */
    poll_state p = {0, 1};
    clnode_gradient *g = NULL;
    assert_int_equal(seed_gradient(&p, batch, &g), CLNODE_ERR_CANCELLED);
    assert_null(g);
    assert_int_equal(p.calls, 1);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "cancelled"));
    poll_state never = {0, 0};
    clnode_gradient *a = NULL, *b = NULL;
    assert_int_equal(seed_gradient(&never, batch, &a), CLNODE_OK);
    assert_int_equal(never.calls, 1); /* between the two groups, not after the last */
    assert_int_equal(seed_gradient(NULL, batch, &b), CLNODE_OK);
    size_t na = 0, nb = 0;
    const double *pa = clnode_gradient_params(a, &na), *pb = clnode_gradient_params(b, &nb);
    assert_int_equal(na, nb);
    assert_memory_equal(pa, pb, na * sizeof(double));
    assert_memory_equal(clnode_gradient_y0(a), clnode_gradient_y0(b), batch * 10 * sizeof(double));
    clnode_gradient_destroy(&a);
    clnode_gradient_destroy(&b);
}

/* The reverse pass's progress report: between groups of blocks once a second has passed, with
 * the trajectories done (whole groups), their fraction and their steps; a non-zero answer
 * cancels. Constant steps of 50 / n over [0, 50] for 4096 trajectories (8 groups); n doubles
 * until the pass runs long enough to report (a fast machine). */
typedef struct grad_report {
    int calls;
    size_t active, batch;
    double fraction;
    long steps;
} grad_report;

static int on_grad_progress(void *user, size_t active, size_t batch, double fraction, long steps)
{
    grad_report *r = user;
    r->calls++;
    r->active = active;
    r->batch = batch;
    r->fraction = fraction;
    r->steps = steps;
    return 1;
}

static void test_gradient_progress(void **state)
{
    (void)state;
    if (strncmp(g_device, "host", 4) != 0)
        skip(); /* the reverse pass runs on the host */
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(g_ctx, &m), CLNODE_OK);
    const size_t B = 8 * 16 * CLNODE_GRADIENT_BLOCK;
    double *y0 = test_calloc(B * 10, sizeof(double)), *cot = test_calloc(B * 10, sizeof(double));
    for (size_t i = 0; i < B * 10; ++i) {
        y0[i] = 0.01 * (double)(i % 7);
        cot[i] = 1.0;
    }
    grad_report r = {0};
    clnode_status st = CLNODE_OK;
    long n = 200;
    for (int tries = 0; tries < 5 && r.calls == 0; ++tries, n *= 2) {
        clnode_solve_options o;
        clnode_solve_seed_options(&o);
        o.keep_tape = 1;
        o.constant_step = 1;
        o.dt0 = 50.0 / (double)n;
        clnode_solution *s = NULL;
        assert_int_equal(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(B, y0), &s), CLNODE_OK);
        clnode_gradient_options go;
        clnode_gradient_default_options(&go);
        go.progress = on_grad_progress;
        go.progress_user = &r;
        clnode_gradient *g = NULL;
        st = clnode_gradient_compute(g_ctx, m, &go, s, 1, cot, &g);
        if (r.calls) {
            clnode_trajectory_stats ts;
            assert_int_equal(clnode_solution_stats(s, 0, &ts), CLNODE_OK);
            const size_t done = B - r.active, group = 16 * CLNODE_GRADIENT_BLOCK;
            print_message("  reverse pass of %ld steps: report at %zu of %zu done (%.3g), "
                          "%ld steps\n",
                          ts.num_accepted, done, r.batch, r.fraction, r.steps);
            assert_int_equal(st, CLNODE_ERR_CANCELLED);
            assert_null(g);
            assert_string_equal(clnode_context_last_error(g_ctx),
                                "cancelled by the progress callback");
            assert_int_equal(r.calls, 1);
            assert_int_equal(r.batch, B);
            assert_true(done > 0 && done < B && done % group == 0);
            assert_true(r.fraction == (double)done / (double)B);
            assert_int_equal(r.steps, (long)done * ts.num_accepted); /* constant steps: alike */
        } else {
            assert_int_equal(st, CLNODE_OK);
        }
        clnode_gradient_destroy(&g);
        clnode_solution_destroy(&s);
    }
    assert_int_equal(r.calls, 1);
    test_free(y0);
    test_free(cot);
    clnode_model_destroy(&m);
}

/* ---- the certificate's re-solves ---- */

static double now_s(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* What the certificate did after the interrupt (the flag), seen through its callbacks and the
 * context's log (every solve logs "solve: ..." at DEBUG as it starts, every context "context on
 * ..." as it opens). */
typedef struct cert_watch {
    int recording;       /* log lines are counted */
    int flag;            /* the interrupt: cancel returns it */
    double t_flag;       /* when it was set */
    double t_start;      /* when clnode_certify was called */
    long progress_calls; /* progress reports from the re-solves */
    long polls_after;    /* cancel polls with the flag set */
    long solves_after;   /* solves started with the flag set */
    long contexts_after; /* contexts opened with the flag set */
    int watchdog;        /* the flag came from the 5 s safety net, not from progress */
} cert_watch;

static cert_watch g_watch;

static void watch_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    (void)code;
    (void)user;
    (void)level;
    if (!g_watch.recording || !g_watch.flag)
        return;
    if (strncmp(msg, "solve:", 6) == 0)
        ++g_watch.solves_after;
    if (strncmp(msg, "context on", 10) == 0)
        ++g_watch.contexts_after;
}

/* The interrupt arrives in the first progress report (the program's handler sets the flag). */
static int watch_progress(void *user, size_t active, size_t batch, double fraction, long steps)
{
    (void)active, (void)batch, (void)fraction, (void)steps;
    cert_watch *w = user;
    ++w->progress_calls;
    if (!w->flag) {
        w->flag = 1;
        w->t_flag = now_s();
    }
    return 0;
}

static int watch_cancel(void *user)
{
    cert_watch *w = user;
    if (!w->flag && now_s() - w->t_start > 5.0) { /* bounds the run when progress never comes */
        w->flag = w->watchdog = 1;
        w->t_flag = now_s();
    }
    w->polls_after += w->flag;
    return w->flag;
}

/* A certificate whose float64 reference solve runs for seconds: the seed problem at rtol 1e-20,
 * unguarded (thousands of steps per unit of time). The run's own solution is a short solve of
 * the same batch (certify reads only its points). */
static clnode_status watched_certify(int flag_at_start, clnode_model *m)
{
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = clnode_context_supports(g_ctx, CLNODE_FP64) ? CLNODE_FP64 : CLNODE_FP32;
    o.rtol = o.atol = 1e-20;
    o.precision_guard = CLNODE_GUARD_OFF;
    o.max_steps = 10;
    double y0[10] = {0};
    clnode_solution *sol = NULL;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(1, y0), &sol));
    o.max_steps = 100000000;
    memset(&g_watch, 0, sizeof g_watch);
    g_watch.flag = flag_at_start;
    g_watch.t_flag = now_s();
    o.progress = watch_progress;
    o.progress_user = &g_watch;
    o.cancel = watch_cancel;
    o.cancel_user = &g_watch;
    clnode_certify_options co;
    clnode_certify_default_options(&co);
    co.fraction = 1.0;
    clnode_certificate *c = NULL;
    g_watch.recording = 1;
    g_watch.t_start = now_s();
    const clnode_status st = clnode_certify(g_ctx, m, &o, TEST_PROBLEM(1, y0), sol, &co, &c);
    const double t_end = now_s();
    g_watch.recording = 0;
    print_message("  certify: %s, %ld progress reports, %.3f s from the flag to the return\n",
                  clnode_status_string(st), g_watch.progress_calls,
                  g_watch.flag ? t_end - g_watch.t_flag : -1.0);
    if (g_watch.flag && !flag_at_start)
        assert_true(t_end - g_watch.t_flag < 2.0);
    clnode_certificate_destroy(&c);
    clnode_solution_destroy(&sol);
    assert_null(c);
    return st;
}

/* Regression: the re-solves were given no progress callback, and nothing stopped a re-solve
 * from starting after the interrupt. An interrupt in a progress report of a re-solve ends the
 * certificate with CLNODE_ERR_CANCELLED at the next poll (well within 2 s), with no solve
 * started after it. */
static void test_certify_cancelled_from_progress(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    assert_int_equal(watched_certify(0, m), CLNODE_ERR_CANCELLED);
    assert_false(g_watch.watchdog); /* progress reached the re-solves */
    assert_true(g_watch.progress_calls >= 1);
    assert_int_equal(g_watch.polls_after, 1);
    assert_int_equal(g_watch.solves_after, 0);
    assert_int_equal(g_watch.contexts_after, 0);
    clnode_model_destroy(&m);
}

/* Regression: an interrupt before the certificate starts: nothing of it runs (no host context,
 * no solve), CLNODE_ERR_CANCELLED. */
static void test_certify_cancelled_before(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    assert_int_equal(watched_certify(1, m), CLNODE_ERR_CANCELLED);
    assert_int_equal(g_watch.progress_calls, 0);
    assert_int_equal(g_watch.solves_after, 0);
    assert_int_equal(g_watch.contexts_after, 0);
    assert_int_equal(g_watch.polls_after, 1);
    clnode_model_destroy(&m);
}

int main(int argc, char **argv)
{
    const int dev_rc =
        test_device_open_at(argc, argv, &g_device, watch_log, CLNODE_LOG_DEBUG, NULL, &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_is_null),
        cmocka_unit_test(test_cancel_stops),
        cmocka_unit_test(test_never_cancelling_changes_nothing),
        cmocka_unit_test(test_gradient_cancel),
        cmocka_unit_test(test_gradient_progress),
        cmocka_unit_test(test_certify_cancelled_from_progress),
        cmocka_unit_test(test_certify_cancelled_before),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
