/* test_layout.c - diffrax's layout of the saved points (clnode_save_slots,
 * clnode_solution_points, clnode_solution_rows_f64/_f32, clnode_solution_kinds,
 * clnode_solution_ts_index) on the host.
 *
 * Every combination of save_t0, save_t1, save_steps and save times, forward and backward, with
 * one interval and with per-trajectory intervals (t0s, t1s) that hold only some of the save
 * times, with max_steps large and small (trajectories that fail early). Each row is checked
 * against a layout built here independently from clnode_solution_saved and the stats: every
 * saved point sorted by time in the direction of integration (at equal times t0 < ts < step <
 * t1), the final point only without steps and at the trajectory's t_final, packed from slot 0,
 * then +inf in times and states, each point's kind as sorted. The f32 rows are the f64 rows cast
 * to float, bit for bit; T is diffrax's count; the ts index is the first save time not before
 * the trajectory's t0. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_util.h"

enum {
    B = 3,
    N = 10,
    NTS = 6,
    MAXP = 1 + NTS + 4096 + 1
};

static clnode_context *g_ctx;
static clnode_model *g_model;

typedef struct ref_point {
    double key;
    int kind;
    double t;
    const double *y;
} ref_point;

static int cmp_ref(const void *a, const void *b)
{
    const ref_point *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->kind - y->kind;
}

/* The expected row of trajectory b (points only), from clnode_solution_saved and the stats. */
static size_t ref_row(const clnode_solution *s, size_t b, double dir, int steps, ref_point *p)
{
    size_t m = 0;
    for (int k = 0; k < 4; ++k) {
        size_t n;
        const double *ts, *ys;
        assert_int_equal(clnode_solution_saved(s, b, (clnode_save_kind)k, &n, &ts, &ys), CLNODE_OK);
        if (k == CLNODE_SAVE_T1 && steps)
            continue; /* the last step is the stop point */
        for (size_t i = 0; i < n; ++i, ++m)
            p[m] = (ref_point){dir * ts[i], k, ts[i], ys + i * N};
    }
    qsort(p, m, sizeof *p, cmp_ref);
    return m;
}

static void check_slots(int t0, int t1, int steps, size_t nts, long max_steps, size_t *T)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    static const double any[NTS] = {0};
    o.save_t0 = t0;
    o.save_t1 = t1;
    o.save_steps = steps;
    clnode_problem pb;
    clnode_problem_default(&pb);
    pb.save_ts = nts ? any : NULL;
    pb.n_save_ts = nts;
    o.max_steps = max_steps;
    assert_int_equal(clnode_save_slots(NULL, &o, &pb, T), CLNODE_OK);
    assert_int_equal(*T,
                     (size_t)t0 + nts + (steps ? (size_t)max_steps : 0) + (size_t)(t1 && !steps));
}

/* The expected index of the first save time not before t0 (in the direction dir). */
static size_t ref_first(const double *save_ts, double t0, double dir)
{
    size_t j = 0;
    while (j < NTS && dir * save_ts[j] < dir * t0)
        ++j;
    return j;
}

static void check_rows(const clnode_solution *s, const clnode_solve_options *o,
                       const clnode_problem *pb, double dir, size_t T, const char *what)
{
    double *ts = malloc(B * T * sizeof *ts), *ys = malloc(B * T * N * sizeof *ys);
    float *tf = malloc(B * T * sizeof *tf), *yf = malloc(B * T * N * sizeof *yf);
    double *ys2 = malloc(B * T * N * sizeof *ys2);
    ref_point *p = malloc(MAXP * sizeof *p);
    assert_true(ts && ys && tf && yf && ys2 && p);
    assert_int_equal(clnode_solution_rows_f64(s, 0, B, T, ts, ys), CLNODE_OK);
    assert_int_equal(clnode_solution_rows_f32(s, 0, B, T, tf, yf), CLNODE_OK);
    assert_int_equal(clnode_solution_rows_f64(s, 0, B, T, NULL, ys2), CLNODE_OK);
    assert_memory_equal(ys, ys2, B * T * N * sizeof *ys);
    size_t most = 0;
    for (size_t b = 0; b < B; ++b) {
        const size_t m = ref_row(s, b, dir, o->save_steps, p);
        if (clnode_solution_points(s, b) != m)
            fail_msg("%s, trajectory %zu: %zu points, want %zu", what, b,
                     clnode_solution_points(s, b), m);
        most = m > most ? m : most;
        clnode_save_kind kinds[MAXP];
        assert_int_equal(clnode_solution_kinds(s, b, m, kinds), CLNODE_OK);
        for (size_t k = 0; k < m; ++k)
            if ((int)kinds[k] != p[k].kind)
                fail_msg("%s, trajectory %zu slot %zu: kind %d, want %d", what, b, k, (int)kinds[k],
                         p[k].kind);
        if (m > 0)
            assert_int_equal(clnode_solution_kinds(s, b, m - 1, kinds),
                             CLNODE_ERR_INVALID_ARGUMENT);
        for (size_t k = 0; k < T; ++k) {
            const double t = k < m ? p[k].t : INFINITY;
            if (memcmp(&ts[b * T + k], &t, sizeof t) != 0)
                fail_msg("%s, trajectory %zu slot %zu: t %.17g, want %.17g", what, b, k,
                         ts[b * T + k], t);
            for (size_t j = 0; j < N; ++j) {
                const double y = k < m ? p[k].y[j] : INFINITY;
                if (memcmp(&ys[(b * T + k) * N + j], &y, sizeof y) != 0)
                    fail_msg("%s, trajectory %zu slot %zu: y%zu differs", what, b, k, j);
            }
        }
        clnode_trajectory_stats st;
        assert_int_equal(clnode_solution_stats(s, b, &st), CLNODE_OK);
        if (o->save_t1 && !o->save_steps) /* the stop point right after the last point */
            assert_memory_equal(&ts[b * T + m - 1], &st.t_final, sizeof(double));
        if (o->save_t0)
            assert_memory_equal(&ts[b * T], pb->t0s ? &pb->t0s[b] : &o->t0, sizeof(double));
        size_t first;
        assert_int_equal(clnode_solution_ts_index(s, b, &first), CLNODE_OK);
        assert_int_equal(first,
                         pb->n_save_ts ? ref_first(pb->save_ts, pb->t0s ? pb->t0s[b] : o->t0, dir) : 0);
        size_t n;
        const double *tts;
        assert_int_equal(clnode_solution_saved(s, b, CLNODE_SAVE_TS, &n, &tts, NULL), CLNODE_OK);
        for (size_t i = 0; i < n; ++i)
            assert_memory_equal(&tts[i], &pb->save_ts[first + i], sizeof(double));
    }
    for (size_t i = 0; i < B * T; ++i) {
        const float t = (float)ts[i];
        assert_memory_equal(&tf[i], &t, sizeof t);
    }
    for (size_t i = 0; i < B * T * N; ++i) {
        const float y = (float)ys[i];
        assert_memory_equal(&yf[i], &y, sizeof y);
    }
    /* too few slots: refused, nothing written; a sub-range is the same rows */
    if (most > 0) {
        double sentinel = 42.0, *one = malloc(T * sizeof *one);
        assert_non_null(one);
        one[0] = sentinel;
        for (size_t b = 0; b < B; ++b)
            if (clnode_solution_points(s, b) == most)
                assert_int_equal(clnode_solution_rows_f64(s, b, 1, most - 1, one, NULL),
                                 CLNODE_ERR_INVALID_ARGUMENT);
        assert_memory_equal(&one[0], &sentinel, sizeof sentinel);
        assert_int_equal(clnode_solution_rows_f64(s, 1, 1, T, one, NULL), CLNODE_OK);
        assert_memory_equal(one, ts + T, T * sizeof *one);
        free(one);
    }
    assert_int_equal(clnode_solution_rows_f64(s, 1, B, T, ts, NULL), CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_solution_rows_f64(NULL, 0, 1, T, ts, NULL),
                     CLNODE_ERR_INVALID_ARGUMENT);
    free(ts);
    free(ys);
    free(tf);
    free(yf);
    free(ys2);
    free(p);
}

/* One solve of the seed problem: direction dir, per-trajectory intervals or one, max_steps. */
static void run_case(int save, double dir, int own, long max_steps, int *failed)
{
    static const double fwd_ts[NTS] = {0.5, 2.0, 4.0, 10.0, 30.0, 45.0};
    static const double fwd_t0s[B] = {0.0, 1.0, 0.0}, fwd_t1s[B] = {50.0, 5.0, 3.0};
    double save_ts[NTS], t0s[B], t1s[B], y0[B * N];
    for (size_t j = 0; j < NTS; ++j)
        save_ts[j] = dir * fwd_ts[j];
    for (size_t b = 0; b < B; ++b) {
        t0s[b] = dir * fwd_t0s[b];
        t1s[b] = dir * fwd_t1s[b];
    }
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.01 * (double)(i % 7) - 0.03;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = CLNODE_FP64;
    o.t0 = 0.0;
    o.t1 = dir * 50.0;
    o.dt0 = dir * 0.02;
    o.save_t0 = save & 1;
    o.save_t1 = (save >> 1) & 1;
    o.save_steps = (save >> 2) & 1;
    clnode_problem pb;
    clnode_problem_default(&pb);
    pb.batch = B;
    pb.y0 = y0;
    if (save & 8) {
        pb.save_ts = save_ts;
        pb.n_save_ts = NTS;
    }
    if (own) {
        pb.t0s = t0s;
        pb.t1s = t1s;
    }
    o.max_steps = max_steps;
    char what[128];
    snprintf(what, sizeof what, "t0 %d t1 %d steps %d ts %d, dir %+g, own %d, max_steps %ld",
             o.save_t0, o.save_t1, o.save_steps, (save >> 3) & 1, dir, own, max_steps);
    size_t T;
    check_slots(o.save_t0, o.save_t1, o.save_steps, pb.n_save_ts, max_steps, &T);
    clnode_solution *s = NULL;
    if (clnode_solve(g_ctx, g_model, &o, &pb, &s) != CLNODE_OK)
        fail_msg("%s: %s", what, clnode_context_last_error(g_ctx));
    for (size_t b = 0; b < B; ++b) {
        clnode_trajectory_stats st;
        assert_int_equal(clnode_solution_stats(s, b, &st), CLNODE_OK);
        *failed += st.result != CLNODE_RESULT_SUCCESS;
    }
    check_rows(s, &o, &pb, dir, T, what);
    clnode_solution_destroy(&s);
}

static void test_every_combination(void **state)
{
    (void)state;
    int failed = 0;
    for (int save = 0; save < 16; ++save)
        for (int d = 0; d < 2; ++d)
            for (int own = 0; own < 2; ++own)
                for (int small = 0; small < 2; ++small)
                    run_case(save, d ? -1.0 : 1.0, own, small ? 6 : 4096, &failed);
    /* the small max_steps makes trajectories fail early (their rows are then packed) */
    assert_true(failed > 0);
}

static void test_slots_refused(void **state)
{
    (void)state;
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    clnode_problem pb;
    clnode_problem_default(&pb);
    size_t T = 7;
    o.max_steps = 0;
    assert_int_equal(clnode_save_slots(g_ctx, &o, NULL, &T), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "max_steps"));
    assert_int_equal(clnode_save_slots(NULL, &o, NULL, &T), CLNODE_ERR_INVALID_ARGUMENT);
    o.max_steps = CLNODE_MAX_STEPS_LIMIT + 1L;
    assert_int_equal(clnode_save_slots(NULL, &o, NULL, &T), CLNODE_ERR_INVALID_ARGUMENT);
    o.max_steps = 10;
    pb.n_save_ts = 3;
    assert_int_equal(clnode_save_slots(g_ctx, &o, &pb, &T), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(g_ctx), "save_ts"));
    assert_int_equal(T, 7);
    assert_int_equal(clnode_save_slots(NULL, NULL, NULL, &T), CLNODE_ERR_INVALID_ARGUMENT);
    pb.n_save_ts = 0;
    assert_int_equal(clnode_save_slots(NULL, &o, &pb, NULL), CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_save_slots(NULL, &o, &pb, &T), CLNODE_OK);
    assert_int_equal(T, 1); /* the default: t1 only */
    pb.struct_size = sizeof pb + 8; /* a problem from a newer library */
    assert_int_equal(clnode_save_slots(g_ctx, &o, &pb, &T), CLNODE_ERR_INVALID_ARGUMENT);
    size_t first = 5;
    assert_int_equal(clnode_solution_ts_index(NULL, 0, &first), CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_solution_points(NULL, 0), 0);
}

int main(void)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    if (clnode_context_create(&co, &g_ctx) != CLNODE_OK ||
        clnode_model_create_seed(g_ctx, &g_model) != CLNODE_OK) {
        fprintf(stderr, "cannot open the host device\n");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slots_refused),
        cmocka_unit_test(test_every_combination),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_model_destroy(&g_model);
    clnode_context_destroy(&g_ctx);
    return rc;
}
