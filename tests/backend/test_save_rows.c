/* test_save_rows.c - every trajectory its own save times (clnode_problem.save_ts_per_trajectory:
 * a batch x T array, row b trajectory b's list), on one device (argv[1], default "host"; 77 when
 * it is absent):
 *   - every trajectory of a batch with its own row is bit for bit the same trajectory solved
 *     alone (batch 1) with its row as the shared list and its own t0, t1, dt0 as the options':
 *     fp32 and fp64, tsit5 adaptive and constant steps, compaction on and off, forwards and
 *     backwards, per-trajectory intervals (one with t0 == t1), duplicates and the interval's
 *     ends in the rows, and a step budget some trajectories run out of (fewer points saved);
 *   - compaction on and off agree bit for bit, and the solve with it on did compact;
 *   - on a device other than the host, every trajectory is bit for bit the host's;
 *   - the layout (clnode_solution_rows_f64, clnode_solution_ts_index) reports each trajectory's
 *     own times;
 *   - the refusals name the trajectory, the index and the values: a non-monotone row, a time
 *     outside its own trajectory's interval (or the shared one), a non-finite time, a row beyond
 *     the fp32 range (its interval's end is named), a flag other than 0 or 1. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <clnode.h>
#include "test_device.h"
#include "test_util.h"
#include "test_problem.h"
#include "test_solution.h"

static const char *g_device = "host";
static clnode_context *g_ctx;
static clnode_context *g_host; /* the host, the reference of other devices; NULL on the host */
static long g_compactions;     /* "compaction:" debug messages since the last reset */

static void count_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    (void)code;
    (void)user;
    if (level == CLNODE_LOG_DEBUG && strncmp(message, "compaction:", 11) == 0)
        ++g_compactions;
}

#define T 6 /* save times per trajectory */

/* A batch of B trajectories of the seed model with their own intervals and rows of save times:
 * each row spreads over its own interval (its ends, a duplicate, and times between). */
typedef struct rows_problem {
    size_t B, N;
    double *y0, *t0s, *t1s, *dt0s, *ts;
    clnode_problem pb;
} rows_problem;

static void rows_make(rows_problem *r, size_t B, size_t N, int backward, int constant)
{
    static const double fr[][T] = {{0.0, 0.1, 0.1, 0.5, 0.9, 1.0},
                                   {0.05, 0.2, 0.35, 0.6, 0.61, 0.8},
                                   {0.3, 0.3, 0.3, 0.7, 1.0, 1.0},
                                   {0.01, 0.02, 0.4, 0.45, 0.97, 0.99}};
    static const double spans[] = {50.0, 12.5, 3.0, 30.0, 0.0, 7.25, 44.0, 1.5, 20.0};
    r->B = B;
    r->N = N;
    r->y0 = malloc(B * N * sizeof(double));
    r->t0s = malloc(B * sizeof(double));
    r->t1s = malloc(B * sizeof(double));
    r->dt0s = malloc(B * sizeof(double));
    r->ts = malloc(B * T * sizeof(double));
    assert_true(r->y0 && r->t0s && r->t1s && r->dt0s && r->ts);
    uint32_t x = 11u + (uint32_t)B;
    for (size_t i = 0; i < B * N; ++i)
        r->y0[i] = 0.4 * test_lcg(&x);
    const double dir = backward ? -1.0 : 1.0;
    for (size_t b = 0; b < B; ++b) {
        const double span = spans[(b * 5 + 3) % (sizeof spans / sizeof spans[0])];
        r->t0s[b] = dir * (-2.0 + 0.75 * (double)(b % 4));
        r->t1s[b] = r->t0s[b] + dir * span;
        r->dt0s[b] = dir * (constant ? 0.25 + 0.125 * (double)(b % 3) : 0.02 * (double)(b % 2));
        for (size_t j = 0; j < T; ++j)
            r->ts[b * T + j] = r->t0s[b] + dir * span * fr[b % 4][j];
        r->ts[b * T + T - 1] = fr[b % 4][T - 1] == 1.0 ? r->t1s[b] : r->ts[b * T + T - 1];
    }
    r->pb = test_problem(B, r->y0);
    r->pb.t0s = r->t0s;
    r->pb.t1s = r->t1s;
    r->pb.dt0s = r->dt0s;
    r->pb.save_ts = r->ts;
    r->pb.n_save_ts = T;
    r->pb.save_ts_per_trajectory = 1;
}

static void rows_free(rows_problem *r)
{
    free(r->y0);
    free(r->t0s);
    free(r->t1s);
    free(r->dt0s);
    free(r->ts);
}

static clnode_solution *solve_on(clnode_context *ctx, const clnode_model *m,
                                 const clnode_solve_options *o, const clnode_problem *p)
{
    clnode_solution *s = NULL;
    const clnode_status st = clnode_solve(ctx, m, o, p, &s);
    if (st != CLNODE_OK)
        fail_msg("clnode_solve: %s: %s", clnode_status_name(st), clnode_context_last_error(ctx));
    return s;
}

/* Trajectory b alone: batch 1, its interval and first step as the options', its row as the shared
 * list of save times. */
static clnode_solution *solve_alone(clnode_context *ctx, const clnode_model *m,
                                    const clnode_solve_options *o, const rows_problem *r, size_t b)
{
    clnode_solve_options a = *o;
    a.t0 = r->t0s[b];
    a.t1 = r->t1s[b];
    a.dt0 = r->dt0s[b];
    clnode_problem p = test_problem(1, r->y0 + b * r->N);
    p.save_ts = r->ts + b * T;
    p.n_save_ts = T;
    return solve_on(ctx, m, &a, &p);
}

/* The reported times are the trajectory's own row (in the state precision), from its index 0. */
static void assert_own_times(const clnode_solution *s, const rows_problem *r, int fp32)
{
    for (size_t b = 0; b < r->B; ++b) {
        size_t n, first = 99;
        const double *ts, *ys;
        assert_ok(clnode_solution_saved(s, b, CLNODE_SAVE_TS, &n, &ts, &ys));
        assert_ok(clnode_solution_ts_index(s, b, &first));
        assert_int_equal(first, 0);
        assert_true(n <= T);
        for (size_t j = 0; j < n; ++j) {
            const double want = fp32 ? (double)(float)r->ts[b * T + j] : r->ts[b * T + j];
            if (memcmp(&ts[j], &want, sizeof want) != 0)
                fail_msg("trajectory %zu, save time %zu: %.17g, its row has %.17g", b, j, ts[j],
                         want);
        }
    }
}

/* Solves r with compaction on and off (on must compact where `expect`), every trajectory
 * against its solve alone and, off the host, against the host; returns the successes. */
static size_t check_rows(const clnode_model *m, clnode_solve_options *o, const rows_problem *r,
                         int expect)
{
    o->compact = 0;
    g_compactions = 0;
    clnode_solution *off = solve_on(g_ctx, m, o, &r->pb);
    assert_int_equal(g_compactions, 0);
    o->compact = 1;
    clnode_solution *on = solve_on(g_ctx, m, o, &r->pb);
    if (expect && g_compactions == 0)
        fail_msg("batch %zu: no compaction", r->B);
    clnode_solution *host = g_host ? solve_on(g_host, m, o, &r->pb) : NULL;
    size_t ok = 0;
    for (size_t b = 0; b < r->B; ++b) {
        test_assert_same_row(on, b, off, b, "compacted against not", 1);
        clnode_solution *one = solve_alone(g_ctx, m, o, r, b);
        test_assert_same_row(off, b, one, 0, "its own row in the batch against alone", 1);
        clnode_solution_destroy(&one);
        if (host)
            test_assert_same_row(on, b, host, b, "the device against the host", 1);
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(on, b, &st));
        ok += st.result == CLNODE_RESULT_SUCCESS;
    }
    assert_own_times(on, r, o->precision == CLNODE_FP32);
    clnode_solution_destroy(&host);
    clnode_solution_destroy(&on);
    clnode_solution_destroy(&off);
    return ok;
}

/* Adaptive and constant steps, forwards and backwards, fp32 and fp64, at batch sizes below and
 * above every backend's row alignment. */
static void test_rows_against_alone(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    static const size_t batches[] = {1, 9, 70};
    size_t succeeded = 0, failed = 0;
    for (int prec = 0; prec < 2; ++prec) {
        if (prec == 1 && !clnode_context_supports(g_ctx, CLNODE_FP64))
            continue;
        for (int mode = 0; mode < 4; ++mode) {
            const int backward = mode & 1, constant = mode >> 1;
            for (size_t bi = 0; bi < sizeof batches / sizeof batches[0]; ++bi) {
                rows_problem r;
                rows_make(&r, batches[bi], clnode_model_dim(m), backward, constant);
                clnode_solve_options o;
                clnode_solve_seed_options(&o);
                o.precision = prec ? CLNODE_FP64 : CLNODE_FP32;
                o.rtol = prec ? 1e-7 : 1e-4;
                o.atol = prec ? 1e-9 : 1e-6;
                o.constant_step = constant;
                o.save_t0 = 1;
                o.save_steps = bi == 1;
                /* a budget the longest intervals run out of: fewer points saved */
                o.max_steps = constant ? 60 : 20;
                const size_t ok = check_rows(m, &o, &r, r.B >= 64);
                succeeded += ok;
                failed += r.B - ok;
                rows_free(&r);
            }
        }
    }
    assert_true(succeeded > 0 && failed > 0); /* trajectories ended both ways */
    clnode_model_destroy(&m);
}

/* The layout's rows: slot 1 + j of trajectory b (save_t0, no steps) holds its own time j; a
 * trajectory out of steps pads the rest. */
static void test_rows_layout(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    rows_problem r;
    rows_make(&r, 9, clnode_model_dim(m), 0, 0);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = CLNODE_FP64;
    if (!clnode_context_supports(g_ctx, CLNODE_FP64))
        o.precision = CLNODE_FP32;
    o.save_t0 = 1;
    o.save_t1 = 0;
    o.max_steps = 8;
    size_t slots = 0;
    assert_ok(clnode_save_slots(g_ctx, &o, &r.pb, &slots));
    assert_int_equal(slots, 1 + T);
    clnode_solution *s = solve_on(g_ctx, m, &o, &r.pb);
    double *ts = malloc(r.B * slots * sizeof(double));
    assert_non_null(ts);
    assert_ok(clnode_solution_rows_f64(s, 0, r.B, slots, ts, NULL));
    int short_row = 0;
    for (size_t b = 0; b < r.B; ++b) {
        size_t n;
        assert_ok(clnode_solution_saved(s, b, CLNODE_SAVE_TS, &n, NULL, NULL));
        short_row |= n < T;
        for (size_t j = 0; j < T; ++j) {
            const double own =
                o.precision == CLNODE_FP32 ? (double)(float)r.ts[b * T + j] : r.ts[b * T + j];
            assert_true(j < n ? ts[b * slots + 1 + j] == own : isinf(ts[b * slots + 1 + j]));
        }
    }
    assert_true(short_row); /* max_steps = 8 stops some before their last times */
    free(ts);
    clnode_solution_destroy(&s);
    rows_free(&r);
    clnode_model_destroy(&m);
}

/* clnode_solve refuses the problem with a message holding every piece of `want`. */
static void assert_refused(const clnode_model *m, const clnode_solve_options *o,
                           const clnode_problem *p, const char *const *want)
{
    clnode_solution *s = NULL;
    assert_int_equal(clnode_solve(g_ctx, m, o, p, &s), CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(s);
    const char *msg = clnode_context_last_error(g_ctx);
    for (size_t k = 0; want[k]; ++k)
        if (!strstr(msg, want[k]))
            fail_msg("the message \"%s\" lacks \"%s\"", msg, want[k]);
}

static void test_rows_refusals(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    rows_problem r;
    rows_make(&r, 4, clnode_model_dim(m), 0, 0);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    /* not monotone: trajectory 3's time 3 before its time 2 (both inside its interval) */
    double keep = r.ts[3 * T + 3];
    r.ts[3 * T + 3] = r.ts[3 * T + 2] - 0.5;
    assert_refused(m, &o, &r.pb, (const char *const[]){"monotone", "time 3 of trajectory 3", NULL});
    r.ts[3 * T + 3] = keep;
    /* outside its own interval (inside another trajectory's) */
    r.ts[1 * T + 0] = r.t0s[1] - 0.25;
    char t0[32];
    snprintf(t0, sizeof t0, "[%g, %g]", r.t0s[1], r.t1s[1]);
    assert_refused(m, &o, &r.pb,
                   (const char *const[]){"save time 0 of trajectory 1", "outside", t0, NULL});
    r.ts[1 * T + 0] = r.t0s[1];
    /* the shared interval (no t0s, t1s) bounds every row as well */
    r.pb.t0s = r.pb.t1s = NULL;
    o.t0 = 0.0;
    o.t1 = 1.0;
    assert_refused(m, &o, &r.pb, (const char *const[]){"of trajectory 0", "outside", NULL});
    r.pb.t0s = r.t0s;
    r.pb.t1s = r.t1s;
    /* not finite */
    keep = r.ts[3 * T + 5];
    r.ts[3 * T + 5] = NAN;
    assert_refused(m, &o, &r.pb, (const char *const[]){"save time 5 of trajectory 3 is", NULL});
    r.ts[3 * T + 5] = keep;
    /* the flag */
    r.pb.save_ts_per_trajectory = 2;
    assert_refused(m, &o, &r.pb, (const char *const[]){"save_ts_per_trajectory = 2", NULL});
    r.pb.save_ts_per_trajectory = 1;
    /* beyond the fp32 range: a row inside its own interval lies beyond the range only where
     * that interval's end does, which is named first */
    double t0s[4], t1s[4], ts[4 * T];
    for (size_t b = 0; b < 4; ++b) {
        t0s[b] = 0.0;
        t1s[b] = b == 2 ? 1e39 : 1.0;
        for (size_t j = 0; j < T; ++j)
            ts[b * T + j] = t1s[b] * (double)j / (T - 1);
    }
    r.pb.t0s = t0s;
    r.pb.t1s = t1s;
    r.pb.save_ts = ts;
    o.precision = CLNODE_FP32;
    assert_refused(m, &o, &r.pb, (const char *const[]){"t1 of trajectory 2", "fp32 range", NULL});
    t1s[2] = 1.0; /* the interval fits, the row does not: refused by its own interval first */
    assert_refused(m, &o, &r.pb, (const char *const[]){"of trajectory 2", "outside", NULL});
    /* the solve is fine once every value is */
    for (size_t j = 0; j < T; ++j)
        ts[2 * T + j] = (double)j / (T - 1);
    clnode_solution *s = solve_on(g_ctx, m, &o, &r.pb);
    clnode_solution_destroy(&s);
    rows_free(&r);
    clnode_model_destroy(&m);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open_at(argc, argv, &g_device, count_log, CLNODE_LOG_DEBUG,
                                           "save-rows", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    if (strcmp(g_device, "host") != 0 && clnode_context_create(NULL, &g_host) != CLNODE_OK) {
        fprintf(stderr, "no host context\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_against_alone),
        cmocka_unit_test(test_rows_layout),
        cmocka_unit_test(test_rows_refusals),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_host);
    clnode_context_destroy(&g_ctx);
    return rc;
}
