/* test_host_threads.c - the host backend's thread pool and thread settings, and the probe cache:
 *   - every part of every job runs exactly once, also on the first job after the workers start
 *     (a job published before a worker first waits must not be missed), with 1 to 5 threads;
 *   - a solve gives the same bits and steps at every thread count, set through the context option
 *     or CLNODE_NUM_THREADS (the option wins), and the device name tells the count;
 *   - the packed model the backend keeps between solves serves only the same model: a model of
 *     the same shapes with another weight gets its own bits;
 *   - probe results are stored in the cache folder, read back equal by the next context, ignored
 *     when the file is damaged or its key differs, and neither read nor written with
 *     CLNODE_PROBE_CACHE=0. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backends/backend.h"
#include "backends/host/host_pool.h"
#include "clnode.h"
#include "test_problem.h"
#include "precision/probe_internal.h"
#include "test_util.h"

/* ---- the pool ---- */

typedef struct count_job {
    int hits[8];
    int parts_seen[8];
} count_job;

static void count_part(void *arg, size_t part, size_t parts)
{
    count_job *j = arg;
    j->hits[part] += 1; /* each part has its own slot: no two threads write one */
    j->parts_seen[part] = (int)parts;
}

static void test_pool_parts_once(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 5; ++threads) {
        for (int round = 0; round < 20; ++round) {
            /* a fresh pool each round: the first job races with the workers' start */
            cln_pool *pool = cln_pool_create(threads);
            assert_non_null(pool);
            assert_int_equal(cln_pool_threads(pool), threads);
            for (size_t parts = 1; parts <= (size_t)threads; ++parts) {
                count_job j;
                memset(&j, 0, sizeof j);
                cln_pool_run(pool, parts, count_part, &j);
                for (size_t p = 0; p < 8; ++p) {
                    if (j.hits[p] != (p < parts ? 1 : 0))
                        fail_msg("threads %d, parts %zu: part %zu ran %d times", threads, parts, p,
                                 j.hits[p]);
                    if (p < parts)
                        assert_int_equal(j.parts_seen[p], (int)parts);
                }
            }
            /* jobs back to back with part counts that go up and down: a worker left out of one
             * job (and still watching for the next) must run only the parts it is given */
            for (int i = 0; i < 200; ++i) {
                const size_t parts = 1 + (size_t)(i * 7 + round) % (size_t)threads;
                count_job j;
                memset(&j, 0, sizeof j);
                cln_pool_run(pool, parts, count_part, &j);
                for (size_t p = 0; p < 8; ++p)
                    if (j.hits[p] != (p < parts ? 1 : 0))
                        fail_msg("threads %d, job %d of %zu parts: part %zu ran %d times", threads,
                                 i, parts, p, j.hits[p]);
            }
            cln_pool_destroy(pool);
        }
    }
    cln_pool_destroy(NULL);
}

static void test_pool_sizing(void **state)
{
    (void)state;
    cln_pool *pool = cln_pool_create(4);
    assert_non_null(pool);
    /* seed MLP: 12000 multiply-adds per row, 2^20 per part -> 88 rows per part */
    assert_int_equal(cln_pool_parts(pool, 1, 12000, 1u << 20, 64), 1);
    assert_int_equal(cln_pool_parts(pool, 64, 12000, 1u << 20, 64), 1);
    assert_int_equal(cln_pool_parts(pool, 176, 12000, 1u << 20, 64), 2);
    assert_int_equal(cln_pool_parts(pool, 4096, 12000, 1u << 20, 64), 4);
    assert_int_equal(cln_pool_parts(pool, 128, 1, 1u << 20, 64), 1);
    cln_pool_destroy(pool);
    cln_pool *one = cln_pool_create(1);
    assert_int_equal(cln_pool_parts(one, 100000, 12000, 1, 1), 1);
    cln_pool_destroy(one);
}

/* ---- solves at every thread count ---- */

#define TB 600 /* rows: enough for 4 parts of the fused pass */

static void solve_seed(int threads, const char *env, double *y, int *steps, char *device,
                       size_t cap)
{
    if (env)
        setenv("CLNODE_NUM_THREADS", env, 1);
    else
        unsetenv("CLNODE_NUM_THREADS");
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.num_threads = threads;
    clnode_context *ctx = NULL;
    assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
    snprintf(device, cap, "%s", clnode_context_device(ctx));
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    const size_t N = clnode_model_dim(m);
    double *y0 = malloc(TB * N * sizeof *y0);
    assert_non_null(y0);
    for (size_t i = 0; i < TB * N; ++i)
        y0[i] = 0.5 * sin(0.37 * (double)i);
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(TB, y0), &sol), CLNODE_OK);
    for (size_t b = 0; b < TB; ++b) {
        clnode_trajectory_stats st;
        assert_int_equal(clnode_solution_stats(sol, b, &st), CLNODE_OK);
        steps[b] = (int)st.num_steps;
        memcpy(y + b * N, clnode_solution_y_final(sol, b), N * sizeof *y);
    }
    free(y0);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    unsetenv("CLNODE_NUM_THREADS");
}

static void test_threads_same_bits(void **state)
{
    (void)state;
    enum {
        N = 10
    };
    static double y1[TB * N], y[TB * N];
    static int s1[TB], s[TB];
    char dev[256];
    solve_seed(1, NULL, y1, s1, dev, sizeof dev);
    assert_non_null(strstr(dev, " 1 threads"));
    const struct {
        int threads;
        const char *env;
        const char *expect;
    } cases[] = {{2, NULL, " 2 threads"},
                 {4, NULL, " 4 threads"},
                 {3, "1", " 3 threads"}, /* the option wins over the environment */
                 {0, "4", " 4 threads"},
                 {0, "junk", " threads"}}; /* ignored: the CPU count */
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
        solve_seed(cases[c].threads, cases[c].env, y, s, dev, sizeof dev);
        if (!strstr(dev, cases[c].expect))
            fail_msg("device \"%s\" does not say \"%s\"", dev, cases[c].expect);
        assert_memory_equal(s, s1, sizeof s);
        assert_memory_equal(y, y1, sizeof y);
    }
    print_message("  seed problem, batch %d: the same steps and bits with 1 to 4 threads\n", TB);
}

/* ---- the packed model kept between solves ----
 * The backend keeps the last solve's packed weights and reuses them when the next solve's model is
 * the same. A model of the same shapes with one weight changed, in fp32 and in fp64, must give its
 * own result, the same bits as in a fresh context, and the first model again its own; the same
 * model twice in a row (recognised by its serial, its upload skipped) its own bits each time. */

static void solve_seed_like(clnode_context *ctx, const clnode_model *m, clnode_precision prec,
                            double *y, long *steps)
{
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = prec;
    const double y0[10] = {0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.1};
    clnode_solution *s = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(1, y0), &s), CLNODE_OK);
    clnode_trajectory_stats st;
    assert_int_equal(clnode_solution_stats(s, 0, &st), CLNODE_OK);
    *steps = st.num_steps;
    memcpy(y, clnode_solution_y_final(s, 0), 10 * sizeof(double));
    clnode_solution_destroy(&s);
}

static clnode_context *host_context(void)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.num_threads = 1;
    clnode_context *ctx = NULL;
    assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
    return ctx;
}

static void test_kept_model(void **state)
{
    (void)state;
    clnode_context *ctx = host_context(), *fresh = host_context();
    clnode_model *seed = NULL, *other = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &seed), CLNODE_OK);
    const size_t L = clnode_model_num_layers(seed);
    size_t sizes[8];
    const double *w[8], *b[8];
    double *w1 = NULL;
    for (size_t l = 0; l < L; ++l) {
        sizes[l] = clnode_model_layer_in(seed, l);
        sizes[l + 1] = clnode_model_layer_out(seed, l);
        w[l] = clnode_model_weight(seed, l);
        b[l] = clnode_model_bias(seed, l);
    }
    /* the middle layer's last weight changed: the same shapes, another model */
    const size_t nw = sizes[2] * sizes[1];
    w1 = malloc(nw * sizeof *w1);
    assert_non_null(w1);
    memcpy(w1, w[1], nw * sizeof *w1);
    w1[nw - 1] += 0.25;
    w[1] = w1;
    clnode_model_desc d = test_mlp_desc(L, sizes, w, b);
    d.activation = clnode_model_activation(seed);
    d.final_activation = clnode_model_final_activation(seed);
    assert_int_equal(clnode_model_create(ctx, &d, &other), CLNODE_OK);
    const clnode_precision precs[] = {CLNODE_FP32, CLNODE_FP64};
    for (int p = 0; p < 2; ++p) {
        double ya[10], yb[10], ya2[10], yb_fresh[10], ya_fresh[10];
        long sa, sb, sa2, sbf, saf;
        solve_seed_like(fresh, seed, precs[p], ya_fresh, &saf);
        solve_seed_like(fresh, other, precs[p], yb_fresh, &sbf);
        solve_seed_like(ctx, seed, precs[p], ya, &sa);
        solve_seed_like(ctx, other, precs[p], yb, &sb);
        solve_seed_like(ctx, seed, precs[p], ya2, &sa2);
        /* the same model again: the backend recognises it and the driver skips its upload */
        double ya3[10];
        long sa3;
        solve_seed_like(ctx, seed, precs[p], ya3, &sa3);
        assert_int_equal(sa3, saf);
        assert_memory_equal(ya3, ya_fresh, sizeof ya3);
        /* the changed weight changes the result */
        assert_true(memcmp(ya_fresh, yb_fresh, sizeof ya) != 0);
        assert_int_equal(sa, saf);
        assert_int_equal(sb, sbf);
        assert_int_equal(sa2, saf);
        assert_memory_equal(ya, ya_fresh, sizeof ya);
        assert_memory_equal(yb, yb_fresh, sizeof yb);
        assert_memory_equal(ya2, ya_fresh, sizeof ya2);
    }
    /* a model destroyed and another one created in its place (perhaps at the same address),
     * solved right after it: its own bits, not the kept ones of the destroyed model */
    {
        double yo[10], yn[10], yn_fresh[10];
        long so, sn, snf;
        solve_seed_like(ctx, other, CLNODE_FP32, yo, &so);
        clnode_model_destroy(&other);
        w1[nw - 1] -= 0.5;
        assert_int_equal(clnode_model_create(ctx, &d, &other), CLNODE_OK);
        solve_seed_like(ctx, other, CLNODE_FP32, yn, &sn);
        solve_seed_like(fresh, other, CLNODE_FP32, yn_fresh, &snf);
        assert_true(memcmp(yo, yn, sizeof yo) != 0);
        assert_int_equal(sn, snf);
        assert_memory_equal(yn, yn_fresh, sizeof yn);
    }
    print_message("  a model of the same shapes after the seed (and back), the same model twice, a "
                  "model created in place of a destroyed one: its own bits, fp32 and fp64\n");
    free(w1);
    clnode_model_destroy(&other);
    clnode_model_destroy(&seed);
    clnode_context_destroy(&fresh);
    clnode_context_destroy(&ctx);
}

/* ---- the probe cache ---- */

static char cache_root[256];

static int count_files(const char *dir)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s 2>/dev/null | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    return n;
}

static int logged_cached;
static void log_fn(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    (void)code;
    (void)user;
    (void)level;
    if (strstr(msg, "GEMM probe") && strstr(msg, "(cached)"))
        logged_cached = 1;
}

static void probe_once(clnode_probe_result *r, int *cached)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = log_fn;
    co.log_level = CLNODE_LOG_INFO;
    clnode_context *ctx = NULL;
    assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
    logged_cached = 0;
    assert_int_equal(clnode_probe_gemm(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT, r), CLNODE_OK);
    *cached = logged_cached;
    clnode_context_destroy(&ctx);
}

static void test_probe_cache(void **state)
{
    (void)state;
    snprintf(cache_root, sizeof cache_root, "/tmp/clnode-probe-cache-test.%ld", (long)getpid());
    setenv("XDG_CACHE_HOME", cache_root, 1);
    char dir[300], cmd[700];
    snprintf(dir, sizeof dir, "%s/clnode", cache_root);

    /* off: nothing written */
    setenv("CLNODE_PROBE_CACHE", "0", 1);
    clnode_probe_result a, b;
    int cached;
    probe_once(&a, &cached);
    assert_false(cached);
    assert_true(count_files(dir) <= 0);

    /* on: measured and stored, then read back equal */
    unsetenv("CLNODE_PROBE_CACHE");
    probe_once(&a, &cached);
    assert_false(cached);
    assert_int_equal(count_files(dir), 1);
    probe_once(&b, &cached);
    assert_true(cached);
    assert_memory_equal(&a, &b, sizeof a);
    assert_int_equal(b.gemm_class, CLNODE_GEMM_CLASS_FP32);

    /* a damaged file is ignored (measured again) and replaced by a whole one */
    snprintf(cmd, sizeof cmd,
             "for f in %s/probe-*.txt; do head -c 150 \"$f\" > \"$f.x\" && "
             "mv \"$f.x\" \"$f\"; done",
             dir);
    assert_int_equal(system(cmd), 0);
    probe_once(&b, &cached);
    assert_false(cached);
    assert_memory_equal(&a, &b, sizeof a);
    probe_once(&b, &cached);
    assert_true(cached);

    /* a file whose key differs (another driver, device or build) is not used */
    snprintf(cmd, sizeof cmd, "sed -i '1s/| host |/| host2 |/' %s/probe-*.txt", dir);
    assert_int_equal(system(cmd), 0);
    probe_once(&b, &cached);
    assert_false(cached);

    /* a wrong value with the right key is what the cache would serve: proof it is read */
    snprintf(cmd, sizeof cmd, "sed -i 's/^gemm_class .*/gemm_class 5/' %s/probe-*.txt", dir);
    assert_int_equal(system(cmd), 0);
    probe_once(&b, &cached);
    assert_true(cached);
    assert_int_equal(b.gemm_class, CLNODE_GEMM_CLASS_TF32);

    /* the stored results are read when the context is created, not by its first probe (which a
     * first solve makes): a file removed in between is still served */
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = log_fn;
    co.log_level = CLNODE_LOG_INFO;
    clnode_context *ctx = NULL;
    assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
    snprintf(cmd, sizeof cmd, "rm -f %s/probe-*.txt", dir);
    assert_int_equal(system(cmd), 0);
    logged_cached = 0;
    assert_int_equal(clnode_probe_gemm(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT, &b), CLNODE_OK);
    assert_true(logged_cached);
    assert_int_equal(b.gemm_class, CLNODE_GEMM_CLASS_TF32);
    clnode_context_destroy(&ctx);

    snprintf(cmd, sizeof cmd, "rm -rf %s", cache_root);
    assert_int_equal(system(cmd), 0);
    unsetenv("XDG_CACHE_HOME");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_parts_once),   cmocka_unit_test(test_pool_sizing),
        cmocka_unit_test(test_threads_same_bits), cmocka_unit_test(test_kept_model),
        cmocka_unit_test(test_probe_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
