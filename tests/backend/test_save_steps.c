/* test_save_steps.c - saving every step (clnode_solve_options.save_steps) with storage that grows
 * with the steps taken, on one device (argv[1], default "host"; 77 when it is absent).
 *
 * The solver gives each trajectory room for a few groups of steps and doubles it on the device
 * between groups of steps (cln_grow_steps in lib/solver/solver_save.c); the solution keeps as many
 * points per trajectory as the longest trajectory saved. White-box: the first capacity is set
 * through the context's test setting steps_cap_first, so that
 *   - the reference is the layout without growth (room for max_steps points per trajectory from
 *     the start, what the solver did before its storage grew), and
 *   - the solves under test start with room for one point and grow through every doubling
 *     (counted in the debug log), with compaction on and off,
 * and every trajectory must come back with the same steps, result, final state and saved points
 * (t0, the save_ts dense output, every step, t1), bit for bit. Independent checks of the saved
 * steps: one point per accepted step, times increasing, the last point the final state; a few
 * trajectories solved alone save the same points. Then max_steps = 10^8 at a batch of 4096: the
 * solve completes, the solution has room for exactly the most points a trajectory saved, and the
 * process's peak resident memory grows by a few MB, not by max_steps points per trajectory. And a
 * kept solve (keep_tape) reads back only its checkpoint groups' states, counted in the debug log. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "core/internal.h"   /* the context's test settings */
#include "solver/solution.h" /* cln_solution_capacity */
#include "test_device.h"
#include "test_util.h"
#include "test_problem.h"
#include "test_solution.h"

static const char *g_device = "host";
static clnode_context *g_ctx;
static long g_growths;   /* "saved steps:" debug messages since the last reset */
static long g_kept = -1; /* the states the last kept solve read back ("kept tape:"); -1: none */

static void count_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    (void)code;
    (void)user;
    if (level == CLNODE_LOG_DEBUG && strncmp(message, "saved steps:", 12) == 0)
        ++g_growths;
    if (level == CLNODE_LOG_DEBUG && strncmp(message, "kept tape:", 10) == 0)
        g_kept = strtol(message + 10, NULL, 10);
}

/* The saved steps of s against what the solve says independently of them: one point per
 * accepted step, times strictly increasing in the direction of integration, the last point at
 * (t_final, y_final); the solution's room is the most points a trajectory saved. Returns that. */
static size_t check_steps(const clnode_solution *s)
{
    const size_t B = clnode_solution_batch(s), N = clnode_solution_dim(s);
    size_t most = 0;
    for (size_t b = 0; b < B; ++b) {
        clnode_trajectory_stats st;
        assert_ok(clnode_solution_stats(s, b, &st));
        size_t n;
        const double *t, *y;
        assert_ok(clnode_solution_saved(s, b, CLNODE_SAVE_STEPS, &n, &t, &y));
        if ((long)n != st.num_accepted)
            fail_msg("trajectory %zu: %zu saved steps, %ld accepted", b, n, st.num_accepted);
        most = n > most ? n : most;
        for (size_t i = 1; i < n; ++i)
            if (!(t[i] > t[i - 1]))
                fail_msg("trajectory %zu: saved step %zu at t %.17g after %.17g", b, i, t[i],
                         t[i - 1]);
        if (n && (memcmp(&t[n - 1], &st.t_final, sizeof(double)) ||
                  memcmp(y + (n - 1) * N, clnode_solution_y_final(s, b), N * sizeof(double))))
            fail_msg("trajectory %zu: the last saved step (t %.17g) is not the final state (t "
                     "%.17g)",
                     b, t[n - 1], st.t_final);
    }
    assert_int_equal(cln_solution_capacity(s, CLNODE_SAVE_STEPS), most);
    return most;
}

static clnode_solution *solve_with(const clnode_model *m, const clnode_solve_options *o,
                                   const clnode_problem *p, size_t first_cap, int compact)
{
    clnode_solve_options c = *o;
    c.compact = compact;
    g_ctx->test.steps_cap_first = first_cap;
    g_growths = 0;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(g_ctx, m, &c, p, &s));
    g_ctx->test.steps_cap_first = 0;
    return s;
}

/* The batch solved with room for every step up front (the reference, without compaction), then
 * from room for one point with compaction off and on, and from the solver's own first capacity:
 * the same bits everywhere. Returns the most points a trajectory saved. */
static size_t compare_growth(const clnode_model *m, const clnode_solve_options *o,
                             const clnode_problem *p, const char *what)
{
    const size_t batch = p->batch;
    clnode_solution *ref = solve_with(m, o, p, (size_t)o->max_steps, 0);
    assert_int_equal(g_growths, 0); /* no growth: the layout with max_steps points per row */
    const size_t most = check_steps(ref);
    static const struct {
        size_t first;
        int compact;
    } runs[] = {{1, 0}, {1, 1}, {0, 1}};
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; ++i) {
        clnode_solution *s = solve_with(m, o, p, runs[i].first, runs[i].compact);
        const long grew = g_growths;
        char label[160];
        snprintf(label, sizeof label, "%s, first capacity %zu, compaction %s", what, runs[i].first,
                 runs[i].compact ? "on" : "off");
        /* from room for one point to more than a hundred: many growths (a first one to a
         * group of steps, doublings after) */
        if (runs[i].first == 1 && grew < 6)
            fail_msg("%s: %ld growths for %zu points", label, grew, most);
        assert_int_equal(check_steps(s), most);
        for (size_t b = 0; b < batch; ++b)
            test_assert_same_row(s, b, ref, b, label, 0);
        printf("%s: %zu points at most, %ld growths\n", label, most, grew);
        clnode_solution_destroy(&s);
    }
    clnode_solution_destroy(&ref);
    return most;
}

/* y' = W y, a slowly decaying rotation: every trajectory takes steps in proportion to its
 * interval, from none (t1 = t0) to the budget (max_steps_reached), hundreds to thousands. */
/* A slowly decaying rotation in the plane: dy/dt = W y, one linear layer. */
static clnode_model *rotation_model(void)
{
    const double W[4] = {-0.01, 1.0, -1.0, -0.01};
    size_t sizes[2] = {2, 2};
    const double *ws[1] = {W};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(g_ctx, &d, &m));
    return m;
}

static void test_rotation_many_doublings(void **state)
{
    (void)state;
    clnode_model *m = rotation_model();
    enum {
        B = 67
    };
    static const double ends[] = {0, 0.5, 7, 60, 150, 300, 900};
    double y0[B * 2], t1s[B], dt0s[B];
    uint32_t x = 5u;
    for (size_t b = 0; b < B; ++b) {
        y0[2 * b] = test_lcg(&x);
        y0[2 * b + 1] = test_lcg(&x);
        t1s[b] = ends[(b * 3) % (sizeof ends / sizeof ends[0])] * (1.0 + 0.01 * (double)(b % 5));
        dt0s[b] = b % 2 ? 0.0 : 0.05;
    }
    const double ts[3] = {0.25, 3.0, 100.0};
    for (int prec = 0; prec < 2; ++prec) {
        if (prec == 1 && !clnode_context_supports(g_ctx, CLNODE_FP64))
            continue;
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_default_options(&o);
        o.precision = prec ? CLNODE_FP64 : CLNODE_FP32;
        pb.t1s = t1s;
        pb.dt0s = dt0s;
        o.rtol = prec ? 1e-8 : 1e-5;
        o.atol = prec ? 1e-10 : 1e-7;
        o.save_t0 = 1;
        pb.save_ts = ts;
        pb.n_save_ts = 3;
        o.save_steps = 1;
        o.max_steps = 1499; /* not a power of two: the last growth stops there */
        const size_t most =
            compare_growth(m, &o, test_batch(&pb, B, y0), prec ? "rotation fp64" : "rotation fp32");
        assert_true(most >= 500); /* many doublings from one point */
        /* the longest ones run out of steps, and each trajectory alone saves the same points */
        clnode_solution *all = solve_with(m, &o, test_batch(&pb, B, y0), 0, 1);
        int ran_out = 0;
        for (size_t b = 0; b < B; ++b) {
            clnode_trajectory_stats st;
            assert_ok(clnode_solution_stats(all, b, &st));
            ran_out |= st.result == CLNODE_RESULT_MAX_STEPS_REACHED;
        }
        assert_true(ran_out);
        static const size_t alone[] = {4, 5, 6, 13};
        for (size_t i = 0; i < sizeof alone / sizeof alone[0]; ++i) {
            const size_t b = alone[i];
            clnode_solve_options o1 = o;
            clnode_problem o1pb = pb;
            o1pb.t1s = &t1s[b];
            o1pb.dt0s = &dt0s[b];
            clnode_solution *one = solve_with(m, &o1, test_batch(&o1pb, 1, &y0[2 * b]), 0, 1);
            test_assert_same_row(one, 0, all, b, "alone", 0);
            clnode_solution_destroy(&one);
        }
        clnode_solution_destroy(&all);
    }
    clnode_model_destroy(&m);
}

/* The first capacity is the setting of the context that solves: the same solve on a second
 * context grows its saved steps as the solver chooses while the first context's setting is 1,
 * and from one point once its own setting is 1 (the setting was a process-wide variable, which
 * every context's solves read). */
static void test_setting_per_context(void **state)
{
    (void)state;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = g_device;
    co.log = count_log;
    co.log_level = CLNODE_LOG_DEBUG;
    clnode_context *other = NULL;
    assert_ok(clnode_context_create(&co, &other));
    const double W[4] = {-0.01, 1.0, -1.0, -0.01};
    size_t sizes[2] = {2, 2};
    const double *ws[1] = {W};
    clnode_model_desc d = test_mlp_desc(1, sizes, ws, NULL);
    clnode_model *m = NULL;
    assert_ok(clnode_model_create(other, &d, &m));
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.t1 = 60;
    o.rtol = 1e-5;
    o.atol = 1e-7;
    o.save_steps = 1;
    double y0[2] = {1, 0};
    clnode_problem pb = test_problem(1, y0);
    long growths[2];
    size_t points[2];
    for (int own = 0; own < 2; ++own) {
        g_ctx->test.steps_cap_first = 1;
        other->test.steps_cap_first = own ? 1 : 0;
        g_growths = 0;
        clnode_solution *s = NULL;
        assert_ok(clnode_solve(other, m, &o, &pb, &s));
        growths[own] = g_growths;
        points[own] = check_steps(s);
        clnode_solution_destroy(&s);
    }
    g_ctx->test.steps_cap_first = 0;
    printf("%zu saved steps: %ld growths from the solver's first capacity, %ld from one point\n",
           points[0], growths[0], growths[1]);
    assert_int_equal(points[0], points[1]);
    assert_true(points[0] >= 128); /* from one point: a growth to a group, then 7 doublings */
    if (growths[1] < 6 || growths[0] > growths[1] - 3)
        fail_msg("%ld growths with the first context's setting 1, %ld with the solving "
                 "context's: the setting is not the solving context's",
                 growths[0], growths[1]);
    clnode_model_destroy(&m);
    clnode_context_destroy(&other);
}

/* The seed model (an MLP) with rejected steps: heun at a tight tolerance and tsit5 (FSAL) over
 * long intervals, per-trajectory ends. */
static void test_seed_growth(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    const size_t N = clnode_model_dim(m);
    enum {
        B = 41
    };
    double y0[B * 10], t1s[B];
    uint32_t x = 11u;
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = 0.5 * test_lcg(&x);
    for (size_t b = 0; b < B; ++b)
        t1s[b] = b % 4 == 0 ? 0.0 : 100.0 * (double)(b % 9);
    const clnode_method *methods[2] = {clnode_method_tsit5, clnode_method_heun};
    for (int mi = 0; mi < 2; ++mi) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_seed_options(&o);
        o.method = methods[mi];
        pb.t1s = t1s;
        o.rtol = mi ? 1e-4 : 1e-5;
        o.save_steps = 1;
        o.max_steps = 100000;
        const size_t most =
            compare_growth(m, &o, test_batch(&pb, B, y0), mi ? "seed heun" : "seed tsit5");
        assert_true(most >= 64);
    }
    clnode_model_destroy(&m);
}

/* No trajectory takes a step (t1 == t0), or a budget of one step: nothing or one point saved. */
static void test_no_steps(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    double y0[3 * 10] = {0};
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 0.0;
    o.save_steps = 1;
    clnode_solution *s = NULL;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(3, y0), &s));
    assert_int_equal(check_steps(s), 0);
    size_t n = 1;
    assert_ok(clnode_solution_saved(s, 2, CLNODE_SAVE_STEPS, &n, NULL, NULL));
    assert_int_equal(n, 0);
    clnode_solution_destroy(&s);
    o.t1 = 50.0;
    o.max_steps = 1;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(3, y0), &s));
    assert_int_equal(check_steps(s), 1);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* max_steps = 10^8 at a batch of 4096 with every step saved: room for max_steps points per
 * trajectory would take 4096 x 10^8 x 11 values (about 18 TB in fp32); the solve completes, its
 * solution has room for the points each trajectory saves, and the process's peak resident
 * memory grows by a few MB. Run first, before other solves raise the peak. */
static void test_huge_max_steps(void **state)
{
    (void)state;
    clnode_model *m = NULL;
    assert_ok(clnode_model_create_seed(g_ctx, &m));
    enum {
        B = 4096
    };
    const size_t N = clnode_model_dim(m);
    double *y0 = calloc(B * N, sizeof *y0);
    assert_non_null(y0);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.save_steps = 1;
    /* a warm-up at the same batch (kernels built, the probe run, buffers of this size once) */
    clnode_solution *s = NULL;
    o.max_steps = 4;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(B, y0), &s));
    clnode_solution_destroy(&s);
    const long before = peak_rss_kb();
    o.max_steps = 100000000;
    assert_ok(clnode_solve(g_ctx, m, &o, TEST_PROBLEM(B, y0), &s));
    const long after = peak_rss_kb();
    clnode_trajectory_stats st;
    assert_ok(clnode_solution_stats(s, B - 1, &st));
    assert_int_equal(st.result, CLNODE_RESULT_SUCCESS);
    assert_int_equal(st.num_steps, 12); /* the seed problem */
    assert_int_equal(check_steps(s), (size_t)st.num_accepted);
    printf("max_steps 1e8, batch %d: room for %zu points per trajectory; peak resident memory "
           "%ld -> %ld kB\n",
           B, cln_solution_capacity(s, CLNODE_SAVE_STEPS), before, after);
    /* the points kept: 4096 x 14 x 11 doubles, 5 MB; the device's rows at most twice that */
    if (before > 0 && after - before > 128 * 1024)
        fail_msg("peak resident memory grew by %ld kB", after - before);
    clnode_solution_destroy(&s);
    free(y0);
    clnode_model_destroy(&m);
}

/* A kept solve (keep_tape, without save_steps) thins its states on the device before reading
 * them back: it reads back one state per checkpoint group but the first (whose start is y0),
 * sum over b of ceil(M_b / k) - 1 for M_b accepted steps, not every step's; the solution holds no
 * saved steps, and the tape's bytes are those clnode/gradient.h gives. Compaction on, trajectories
 * of many lengths, k = 1, 3 and 8. */
static void test_kept_tape_thinned(void **state)
{
    (void)state;
    clnode_model *m = rotation_model();
    enum {
        B = 37
    };
    double y0[B * 2], t1s[B];
    uint32_t x = 11u;
    for (size_t b = 0; b < B; ++b) {
        y0[2 * b] = test_lcg(&x);
        y0[2 * b + 1] = test_lcg(&x);
        t1s[b] = 0.5 + 0.7 * (double)b;
    }
    static const long every[] = {1, 3, 8};
    for (size_t i = 0; i < sizeof every / sizeof every[0]; ++i) {
        clnode_solve_options o;
        clnode_problem pb = test_problem(0, NULL);
        clnode_solve_default_options(&o);
        pb.t1s = t1s;
        o.rtol = 1e-5;
        o.atol = 1e-7;
        o.keep_tape = 1;
        o.checkpoint_every = every[i];
        g_kept = -1;
        clnode_solution *s = solve_with(m, &o, test_batch(&pb, B, y0), 0, 1);
        long want = 0, steps = 0;
        for (size_t b = 0; b < B; ++b) {
            clnode_trajectory_stats st;
            assert_ok(clnode_solution_stats(s, b, &st));
            const long M = st.num_accepted;
            want += M / every[i] + (M % every[i] != 0) - (M > 0);
            steps += M;
            size_t n = 1;
            assert_ok(clnode_solution_saved(s, b, CLNODE_SAVE_STEPS, &n, NULL, NULL));
            assert_int_equal(n, 0); /* no save_steps: the solution keeps no steps */
        }
        printf("keep_tape, checkpoint_every %ld: %ld states read back for %ld steps\n", every[i],
               g_kept, steps);
        if (g_kept != want)
            fail_msg("checkpoint_every %ld: %ld states read back, want %ld (%ld steps)", every[i],
                     g_kept, want, steps);
        assert_true(every[i] == 1 || want * every[i] <= steps);
        clnode_solution_destroy(&s);
    }
    clnode_model_destroy(&m);
}

int main(int argc, char **argv)
{
    const int dev_rc = test_device_open_at(argc, argv, &g_device, count_log, CLNODE_LOG_DEBUG,
                                           "saved steps", &g_ctx);
    if (dev_rc != 0)
        return dev_rc;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_max_steps),
        cmocka_unit_test(test_kept_tape_thinned),
        cmocka_unit_test(test_no_steps),
        cmocka_unit_test(test_rotation_many_doublings),
        cmocka_unit_test(test_seed_growth),
        cmocka_unit_test(test_setting_per_context),
    };
    const int rc = cmocka_run_group_tests(tests, NULL, NULL);
    clnode_context_destroy(&g_ctx);
    return rc;
}
