/* test_abi.c - the ABI of major version 1 (SONAME libclnode.so.1, clnode/common.h): the signatures
 * of the solve entry points, which take the problem (clnode_problem) beside the options, and the
 * structs a program passes, which grow without breaking programs built against an older release:
 * a program whose structs end at the first release's last field gets exactly those bytes written
 * and nothing past them, its options are read up to its struct_size with the defaults for the
 * rest, and a struct larger than the library knows, or one never given its defaults (struct_size
 * 0), is refused. Oracle: canary bytes past the old end, and the solve of the full struct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"

#define END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))
/* the first release's structs end here (their last fields then) */
#define OPTS_V1 END_OF(clnode_solve_options, compact)
#define CTX_V1 END_OF(clnode_context_options, log_level)
#define STATS_V1 END_OF(clnode_trajectory_stats, t_final)
#define PROBE_V1 END_OF(clnode_probe_result, unit_roundoff)
#define FACTS_V1 END_OF(clnode_device_facts, correctly_rounded_div_sqrt)
/* the model description gained its struct_size with num_inputs: the first size it knows */
#define DESC_V1 END_OF(clnode_model_desc, num_inputs)
/* the problem, and the sizes of the structs of clnode/precision.h, came with major version 1 */
#define PROBLEM_V1 END_OF(clnode_problem, n_save_ts)
#define SOPTS_V1 END_OF(clnode_sensitivity_options, floor_ulps)
#define COPTS_V1 END_OF(clnode_certify_options, sensitivity)
#define SUMMARY_V1 END_OF(clnode_certificate_summary, seconds)

/* major version 1: the SONAME's number, and the signatures that took the problem out of the
 * options (a program assigning them to these types compiles only against this ABI) */
_Static_assert(CLNODE_VERSION_MAJOR == 1, "libclnode.so.1");
_Static_assert(offsetof(clnode_problem, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_trajectory_stats, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_probe_result, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_device_facts, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_option_info, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_device_info, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_backend_info, struct_size) == 0, "struct_size first");
_Static_assert(offsetof(clnode_device_gradient, struct_size) == 0, "struct_size first");
/* The first release's trajectory stats, field for field: a field added since goes after them
 * (first_step once sat between num_steps and num_accepted, which moved every later field of an
 * older program's struct) */
typedef struct stats_v1 {
    size_t struct_size;
    clnode_result result;
    long num_steps, num_accepted, num_rejected, num_rhs_evals;
    double t_final;
} stats_v1;
#define SAME_OFFSET(f)                                                                             \
    _Static_assert(offsetof(clnode_trajectory_stats, f) == offsetof(stats_v1, f), #f " moved")
SAME_OFFSET(result);
SAME_OFFSET(num_steps);
SAME_OFFSET(num_accepted);
SAME_OFFSET(num_rejected);
SAME_OFFSET(num_rhs_evals);
SAME_OFFSET(t_final);
_Static_assert(offsetof(clnode_trajectory_stats, first_step) >= sizeof(stats_v1),
               "first_step appended");
static clnode_status (*const abi_solve)(clnode_context *, const clnode_model *,
                                        const clnode_solve_options *, const clnode_problem *,
                                        clnode_solution **) = clnode_solve;
static clnode_status (*const abi_baseline)(clnode_context *, const clnode_model *,
                                           const clnode_solve_options *, const clnode_problem *,
                                           const clnode_sensitivity_options *,
                                           clnode_sensitivity **) = clnode_sensitivity_baseline;
static clnode_status (*const abi_certify)(clnode_context *, const clnode_model *,
                                          const clnode_solve_options *, const clnode_problem *,
                                          const clnode_solution *, const clnode_certify_options *,
                                          clnode_certificate **) = clnode_certify;

/* A struct of `size` bytes followed by canaries, as an older program's would be in memory. */
typedef union old_struct {
    unsigned char bytes[4096];
    max_align_t align;
} old_struct;

static void canary(old_struct *s, size_t from)
{
    memset(s->bytes + from, 0xA5, sizeof s->bytes - from);
}

static int canary_intact(const old_struct *s, size_t from)
{
    for (size_t i = from; i < sizeof s->bytes; ++i)
        if (s->bytes[i] != 0xA5)
            return 0;
    return 1;
}

static void test_defaults_write_only_the_old_fields(void **state)
{
    (void)state;
    old_struct s;
    canary(&s, 0);
    clnode_solve_default_options_sized((clnode_solve_options *)(void *)s.bytes, OPTS_V1);
    assert_true(canary_intact(&s, OPTS_V1));
    const clnode_solve_options *o = (const void *)s.bytes;
    assert_int_equal(o->struct_size, OPTS_V1);
    assert_true(o->rtol == 1e-3 && o->max_steps == 4096 && o->precision_guard == CLNODE_GUARD_WARN);

    canary(&s, 0);
    clnode_context_default_options_sized((clnode_context_options *)(void *)s.bytes, CTX_V1);
    assert_true(canary_intact(&s, CTX_V1));
    assert_int_equal(((const clnode_context_options *)(const void *)s.bytes)->struct_size, CTX_V1);

    canary(&s, 0);
    clnode_model_default_desc_sized((clnode_model_desc *)(void *)s.bytes, DESC_V1);
    assert_true(canary_intact(&s, DESC_V1));
    const clnode_model_desc *d = (const void *)s.bytes;
    assert_int_equal(d->struct_size, DESC_V1);
    assert_true(d->num_layers == 0 && d->sizes == NULL && d->weights == NULL && d->biases == NULL);
    assert_true(d->activation == CLNODE_ACT_IDENTITY && d->final_activation == CLNODE_ACT_IDENTITY);
    assert_true(d->time_input == 0 && d->num_inputs == 0);

    clnode_solve_options full;
    clnode_solve_default_options(&full);
    assert_int_equal(full.struct_size, sizeof full);

    /* the designated initialiser's defaults are the defaults function's */
    clnode_model_desc dd;
    memset(&dd, 0x5A, sizeof dd);
    clnode_model_default_desc(&dd);
    const clnode_model_desc di = {CLNODE_MODEL_DESC_DEFAULTS};
    assert_int_equal(dd.struct_size, sizeof dd);
    assert_int_equal(di.struct_size, dd.struct_size);
    assert_true(di.num_layers == dd.num_layers && di.sizes == dd.sizes &&
                di.weights == dd.weights && di.biases == dd.biases);
    assert_true(di.activation == dd.activation && di.final_activation == dd.final_activation &&
                di.time_input == dd.time_input && di.num_inputs == dd.num_inputs);
    assert_true(di.out_scale == NULL && dd.out_scale == NULL && di.out_scale_size == 0 &&
                dd.out_scale_size == 0);

    canary(&s, 0);
    clnode_problem_default_sized((clnode_problem *)(void *)s.bytes, PROBLEM_V1);
    assert_true(canary_intact(&s, PROBLEM_V1));
    const clnode_problem *p = (const void *)s.bytes;
    assert_int_equal(p->struct_size, PROBLEM_V1);
    assert_true(p->batch == 0 && !p->y0 && !p->t0s && !p->t1s && !p->dt0s && !p->inputs &&
                !p->save_ts && p->n_save_ts == 0);
    assert_int_equal(clnode_version_number() / 10000, CLNODE_VERSION_MAJOR);

    canary(&s, 0);
    clnode_sensitivity_default_options_sized((clnode_sensitivity_options *)(void *)s.bytes,
                                             SOPTS_V1);
    assert_true(canary_intact(&s, SOPTS_V1));
    const clnode_sensitivity_options *so = (const void *)s.bytes;
    assert_true(so->struct_size == SOPTS_V1 && so->num_perturbations == 8 && so->slack == 3);
    canary(&s, 0);
    clnode_certify_default_options_sized((clnode_certify_options *)(void *)s.bytes, COPTS_V1);
    assert_true(canary_intact(&s, COPTS_V1));
    const clnode_certify_options *co = (const void *)s.bytes;
    assert_true(co->struct_size == COPTS_V1 && co->fraction == 0.01 && co->sensitivity == NULL);
    /* a certificate's summary (NULL: all zero) up to its old end only */
    canary(&s, 0);
    assert_int_equal(clnode_certificate_get_sized(
                         NULL, (clnode_certificate_summary *)(void *)s.bytes, SUMMARY_V1),
                     CLNODE_OK);
    assert_true(canary_intact(&s, SUMMARY_V1));
    assert_int_equal(((const clnode_certificate_summary *)(const void *)s.bytes)->struct_size,
                     SUMMARY_V1);
}

/* An old program's options (struct_size = the first release's) solve exactly as the full
 * struct with the same values; its stats are written up to their old end only. */
static void test_old_program_solves(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const double y0[10] = {0};

    old_struct s;
    canary(&s, 0);
    clnode_solve_options *old = (void *)s.bytes;
    clnode_solve_seed_options_sized(old, OPTS_V1);
    assert_true(canary_intact(&s, OPTS_V1));
    clnode_solution *a = NULL, *b = NULL;
    assert_int_equal(clnode_solve(ctx, m, old, TEST_PROBLEM(1, y0), &a), CLNODE_OK);
    clnode_solve_options full;
    clnode_solve_seed_options(&full);
    assert_int_equal(clnode_solve(ctx, m, &full, TEST_PROBLEM(1, y0), &b), CLNODE_OK);

    old_struct st;
    canary(&st, 0);
    assert_int_equal(
        clnode_solution_stats_sized(a, 0, (clnode_trajectory_stats *)(void *)st.bytes, STATS_V1),
        CLNODE_OK);
    assert_true(canary_intact(&st, STATS_V1));
    clnode_trajectory_stats sb;
    assert_int_equal(clnode_solution_stats(b, 0, &sb), CLNODE_OK);
    assert_int_equal(((const clnode_trajectory_stats *)(const void *)st.bytes)->num_steps, 12);
    assert_int_equal(sb.num_steps, 12);
    assert_memory_equal(clnode_solution_y_final(a, 0), clnode_solution_y_final(b, 0),
                        10 * sizeof(double));

    /* probe result and device facts: only the old fields */
    old_struct pr;
    canary(&pr, 0);
    assert_int_equal(clnode_probe_gemm_sized(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT,
                                             (clnode_probe_result *)(void *)pr.bytes, PROBE_V1),
                     CLNODE_OK);
    assert_true(canary_intact(&pr, PROBE_V1));
    canary(&pr, 0);
    assert_int_equal(
        clnode_device_facts_get_sized(ctx, (clnode_device_facts *)(void *)pr.bytes, FACTS_V1),
        CLNODE_OK);
    assert_true(canary_intact(&pr, FACTS_V1));
    assert_int_equal(((const clnode_device_facts *)(const void *)pr.bytes)->fp64, 1);

    clnode_solution_destroy(&a);
    clnode_solution_destroy(&b);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

/* A problem of the first size the library knows, followed by canaries (0xA5, which as
 * save_ts_per_trajectory would be refused), solves with its save times as one list shared by the
 * batch: the canaries are never read as the appended field. */
static void test_old_problem_shares_its_save_times(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const double y0[20] = {0}, ts[2] = {10.0, 20.0};
    old_struct s;
    canary(&s, 0);
    clnode_problem *p = (void *)s.bytes;
    clnode_problem_default_sized(p, PROBLEM_V1);
    p->batch = 2;
    p->y0 = y0;
    p->save_ts = ts;
    p->n_save_ts = 2;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, p, &sol), CLNODE_OK);
    for (size_t b = 0; b < 2; ++b) {
        size_t n = 0;
        const double *t = NULL;
        assert_int_equal(clnode_solution_saved(sol, b, CLNODE_SAVE_TS, &n, &t, NULL), CLNODE_OK);
        assert_true(n == 2 && t[0] == 10.0 && t[1] == 20.0);
    }
    clnode_problem full;
    clnode_problem_default(&full);
    assert_int_equal(full.save_ts_per_trajectory, 0);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

/* A model description of the first size it knows, followed by canaries, makes the model its
 * fields describe (the canaries are never read as fields). */
static void test_old_model_desc(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    const size_t sizes[3] = {3, 4, 2};
    const double w0[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, w1[8] = {1, 0, 0, 1, 1, 1, 0, 0};
    const double *ws[2] = {w0, w1};
    old_struct s;
    canary(&s, 0);
    clnode_model_desc *d = (void *)s.bytes;
    clnode_model_default_desc_sized(d, DESC_V1);
    d->num_layers = 2;
    d->sizes = sizes;
    d->weights = ws;
    d->activation = CLNODE_ACT_TANH;
    d->num_inputs = 1;
    assert_true(canary_intact(&s, DESC_V1));
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create(ctx, d, &m), CLNODE_OK);
    assert_int_equal(clnode_model_num_layers(m), 2);
    assert_int_equal(clnode_model_dim(m), 2);
    assert_int_equal(clnode_model_num_inputs(m), 1);
    assert_int_equal(clnode_model_activation(m), CLNODE_ACT_TANH);
    assert_int_equal(clnode_model_final_activation(m), CLNODE_ACT_IDENTITY);
    assert_int_equal(clnode_model_time_input(m), 0);
    assert_null(clnode_model_bias(m, 0));
    assert_memory_equal(clnode_model_weight(m, 1), w1, sizeof w1);
    size_t n = 1;
    assert_null(clnode_model_out_scale(m, &n)); /* the canaries past it are no scale */
    assert_int_equal(n, 0);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

/* Sizes the library does not know: a newer program's (larger) and a struct never given its
 * defaults (struct_size 0). */
static void test_unknown_sizes_refused(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const double y0[10] = {0};
    old_struct s;
    memset(&s, 0, sizeof s);
    clnode_solve_options *o = (void *)s.bytes;
    clnode_solve_seed_options(o);
    o->struct_size = sizeof *o + 8;
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, o, TEST_PROBLEM(1, y0), &sol),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    o->struct_size = 0;
    assert_int_equal(clnode_solve(ctx, m, o, TEST_PROBLEM(1, y0), &sol),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "struct_size 0"));
    assert_null(sol);

    /* the problem: its size as the options', then each field it must have, named */
    clnode_solve_options ok;
    clnode_solve_seed_options(&ok);
    clnode_problem pb = test_problem(1, y0);
    pb.struct_size = sizeof pb + 8;
    assert_int_equal(abi_solve(ctx, m, &ok, &pb, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem: struct_size"));
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    pb.struct_size = 0;
    assert_int_equal(abi_solve(ctx, m, &ok, &pb, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem: struct_size 0"));
    assert_int_equal(abi_solve(ctx, m, &ok, NULL, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "no problem"));
    pb = test_problem(1, NULL);
    assert_int_equal(abi_solve(ctx, m, &ok, &pb, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem.y0 is NULL"));
    pb = test_problem(0, y0);
    assert_int_equal(abi_solve(ctx, m, &ok, &pb, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem.batch = 0"));
    pb = test_problem((size_t)2147483647 + 1, y0); /* refused before y0 is read */
    assert_int_equal(abi_solve(ctx, m, &ok, &pb, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "out of range (1 to 2147483647)"));
    pb = test_problem(1, y0);
    pb.n_save_ts = 2;
    assert_int_equal(abi_solve(ctx, m, &ok, &pb, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem.save_ts is NULL"));
    assert_null(sol);
    clnode_sensitivity *sb = NULL;
    assert_int_equal(abi_baseline(ctx, m, &ok, TEST_PROBLEM(1, NULL), NULL, &sb),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem.y0 is NULL"));
    assert_null(sb);
    assert_int_equal(abi_solve(ctx, m, &ok, TEST_PROBLEM(1, y0), &sol), CLNODE_OK);
    clnode_certificate *cert = NULL;
    assert_int_equal(abi_certify(ctx, m, &ok, TEST_PROBLEM(0, y0), sol, NULL, &cert),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_problem.batch is 0"));
    assert_null(cert);
    /* the precision structs: a newer program's refused, going in and coming out */
    clnode_sensitivity_options so;
    clnode_sensitivity_default_options(&so);
    so.struct_size = sizeof so + 8;
    assert_int_equal(abi_baseline(ctx, m, &ok, TEST_PROBLEM(1, y0), &so, &sb),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_sensitivity_options"));
    clnode_certify_options cop;
    clnode_certify_default_options(&cop);
    cop.struct_size = 0;
    assert_int_equal(abi_certify(ctx, m, &ok, TEST_PROBLEM(1, y0), sol, &cop, &cert),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(
        strstr(clnode_context_last_error(ctx), "clnode_certify_options: struct_size 0"));
    clnode_certify_default_options(&cop);
    cop.sensitivity = &so;
    assert_int_equal(abi_certify(ctx, m, &ok, TEST_PROBLEM(1, y0), sol, &cop, &cert),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(cert);
    cop.sensitivity = NULL;
    assert_int_equal(abi_certify(ctx, m, &ok, TEST_PROBLEM(1, y0), sol, &cop, &cert), CLNODE_OK);
    clnode_certificate_summary cs;
    assert_int_equal(clnode_certificate_get_sized(cert, &cs, sizeof cs + 8),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_certificate_get(cert, &cs), CLNODE_OK);
    assert_true(cs.struct_size == sizeof cs && cs.num_sampled == 1);
    clnode_certificate_sample sm;
    assert_int_equal(clnode_certificate_sample_get_sized(cert, 0, &sm, sizeof sm + 8),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_certificate_sample_get(cert, 0, &sm), CLNODE_OK);
    assert_true(sm.struct_size == sizeof sm && sm.traj == 0);
    clnode_certificate_destroy(&cert);
    clnode_solution_destroy(&sol);
    /* a program's own method descriptor carries its size: tsit5's copy solves as tsit5 */
    clnode_method own = *clnode_method_tsit5;
    ok.method = &own;
    assert_int_equal(abi_solve(ctx, m, &ok, TEST_PROBLEM(1, y0), &sol), CLNODE_OK);
    clnode_trajectory_stats ts;
    assert_int_equal(clnode_solution_stats(sol, 0, &ts), CLNODE_OK);
    assert_int_equal(ts.num_steps, 12);
    clnode_solution_destroy(&sol);
    own.struct_size = 0;
    assert_int_equal(abi_solve(ctx, m, &ok, TEST_PROBLEM(1, y0), &sol),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_method: struct_size 0"));
    own.struct_size = sizeof own + 8;
    assert_int_equal(abi_solve(ctx, m, &ok, TEST_PROBLEM(1, y0), &sol),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(sol);

    clnode_context_options co;
    clnode_context_default_options(&co);
    co.struct_size = sizeof co + 8;
    clnode_context *c2 = NULL;
    assert_int_equal(clnode_context_create(&co, &c2), CLNODE_ERR_INVALID_ARGUMENT);
    assert_null(c2);

    clnode_probe_result pr;
    assert_int_equal(
        clnode_probe_gemm_sized(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT, &pr, sizeof pr + 8),
        CLNODE_ERR_INVALID_ARGUMENT);

    /* a model description never given its defaults, and a newer program's */
    const size_t sizes[2] = {1, 1};
    const double w[1] = {-1.0};
    const double *ws[1] = {w};
    clnode_model_desc d;
    memset(&d, 0, sizeof d);
    d.num_layers = 1;
    d.sizes = sizes;
    d.weights = ws;
    clnode_model *m2 = NULL;
    assert_int_equal(clnode_model_create(ctx, &d, &m2), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_model_desc: struct_size 0"));
    assert_null(m2);
    d.struct_size = sizeof d + 8;
    assert_int_equal(clnode_model_create(ctx, &d, &m2), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    assert_null(m2);
    d.struct_size = sizeof d;
    assert_int_equal(clnode_model_create(ctx, &d, &m2), CLNODE_OK);
    clnode_model_destroy(&m2);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

/* The structs the library fills in the program's memory (clnode_trajectory_stats,
 * clnode_probe_result, clnode_device_facts): an older program's struct of the first release's size
 * gets the fields it has, struct_size set to that size and nothing past it; a newer program's
 * (larger) and one smaller than the first release's are refused, the struct untouched. Oracle:
 * the same call into this build's full struct, and canary bytes. */
static void test_filled_structs_sized(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const double y0[10] = {0};
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(1, y0), &sol), CLNODE_OK);

    old_struct s;
    canary(&s, 0);
    const clnode_trajectory_stats *st = (const void *)s.bytes;
    assert_int_equal(
        clnode_solution_stats_sized(sol, 0, (clnode_trajectory_stats *)(void *)s.bytes, STATS_V1),
        CLNODE_OK);
    assert_true(canary_intact(&s, STATS_V1));
    clnode_trajectory_stats full;
    assert_int_equal(clnode_solution_stats(sol, 0, &full), CLNODE_OK);
    assert_int_equal(full.struct_size, sizeof full);
    assert_int_equal(st->struct_size, STATS_V1);
    assert_true(st->result == full.result && st->num_steps == full.num_steps &&
                st->num_accepted == full.num_accepted && st->num_rejected == full.num_rejected &&
                st->num_rhs_evals == full.num_rhs_evals && st->t_final == full.t_final);
    assert_int_equal(full.num_steps, 12);
    canary(&s, 0);
    assert_int_equal(clnode_solution_stats_sized(sol, 0, (clnode_trajectory_stats *)(void *)s.bytes,
                                                 sizeof full + 8),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_int_equal(clnode_solution_stats_sized(sol, 0, (clnode_trajectory_stats *)(void *)s.bytes,
                                                 STATS_V1 - 1),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_true(canary_intact(&s, 0));

    canary(&s, 0);
    const clnode_probe_result *pr = (const void *)s.bytes;
    assert_int_equal(clnode_probe_gemm_sized(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT,
                                             (clnode_probe_result *)(void *)s.bytes, PROBE_V1),
                     CLNODE_OK);
    assert_true(canary_intact(&s, PROBE_V1));
    clnode_probe_result pf;
    assert_int_equal(clnode_probe_gemm(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT, &pf), CLNODE_OK);
    assert_int_equal(pf.struct_size, sizeof pf);
    assert_int_equal(pr->struct_size, PROBE_V1);
    assert_true(pr->precision == CLNODE_FP32 && pr->gemm_mode == CLNODE_GEMM_STRICT);
    assert_true(pr->identity_exact == pf.identity_exact && pr->random_bits == pf.random_bits &&
                pr->gemm_class == pf.gemm_class && pr->unit_roundoff == pf.unit_roundoff);
    assert_int_equal(pr->gemm_class, CLNODE_GEMM_CLASS_FP32);
    canary(&s, 0);
    assert_int_equal(clnode_probe_gemm_sized(ctx, CLNODE_FP32, CLNODE_GEMM_STRICT,
                                             (clnode_probe_result *)(void *)s.bytes, PROBE_V1 - 1),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_probe_result: struct_size"));
    assert_true(canary_intact(&s, 0));

    canary(&s, 0);
    const clnode_device_facts *df = (const void *)s.bytes;
    assert_int_equal(
        clnode_device_facts_get_sized(ctx, (clnode_device_facts *)(void *)s.bytes, FACTS_V1),
        CLNODE_OK);
    assert_true(canary_intact(&s, FACTS_V1));
    clnode_device_facts ff;
    assert_int_equal(clnode_device_facts_get(ctx, &ff), CLNODE_OK);
    assert_int_equal(ff.struct_size, sizeof ff);
    assert_int_equal(df->struct_size, FACTS_V1);
    assert_true(df->fp64 == 1 && df->fma == ff.fma && df->denormals == ff.denormals &&
                df->correctly_rounded_div_sqrt == ff.correctly_rounded_div_sqrt);
    canary(&s, 0);
    assert_int_equal(
        clnode_device_facts_get_sized(ctx, (clnode_device_facts *)(void *)s.bytes, sizeof ff + 8),
        CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    assert_true(canary_intact(&s, 0));

    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

/* The structs the library owns and hands out by pointer (clnode_option_info, clnode_device_info,
 * clnode_backend_info) carry this build's sizeof, and CLNODE_HAS_FIELD reads it: a field past a
 * smaller struct_size (as an older library's) is absent. */
static void test_library_structs_sized(void **state)
{
    (void)state;
    assert_true(clnode_solve_option_count() > 0);
    for (size_t i = 0; i < clnode_solve_option_count(); ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        assert_int_equal(in->struct_size, sizeof *in);
        assert_true(CLNODE_HAS_FIELD(in, choice_values));
    }
    const clnode_option_info *rtol = clnode_solve_option_find("rtol");
    assert_true(rtol->type == CLNODE_OPTION_REAL && rtol->n_choices == 0);
    assert_string_equal(clnode_solve_option_find("precision")->choice_names[1], "fp64");

    clnode_device_list *l = NULL;
    assert_int_equal(clnode_device_list_create(NULL, NULL, &l), CLNODE_OK);
    assert_true(clnode_device_list_count(l) >= 2); /* "host" and its second engine */
    for (size_t i = 0; i < clnode_device_list_count(l); ++i) {
        const clnode_device_info *d = clnode_device_list_get(l, i);
        assert_int_equal(d->struct_size, sizeof *d);
        assert_true(CLNODE_HAS_FIELD(d, fp64));
    }
    assert_string_equal(clnode_device_list_get(l, 0)->spec, "host");
    assert_int_equal(clnode_device_list_num_backends(l), 3);
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        assert_int_equal(b->struct_size, sizeof *b);
        assert_true(CLNODE_HAS_FIELD(b, capabilities));
    }
    assert_string_equal(clnode_device_list_backend(l, 0)->name, "host");
    /* an older library's entry, ending before the field */
    clnode_backend_info old = *clnode_device_list_backend(l, 0);
    old.struct_size = offsetof(clnode_backend_info, capabilities);
    assert_false(CLNODE_HAS_FIELD(&old, capabilities));
    assert_true(CLNODE_HAS_FIELD(&old, note));
    clnode_device_list_destroy(&l);
}

/* The lists behind the enums (CLNODE_RESULT_LIST, CLNODE_ACTIVATION_LIST): values 0 to count - 1,
 * each with its own name, the name parsed back to the value, and "unknown" past the end. */
static void test_name_lists(void **state)
{
    (void)state;
    assert_int_equal(clnode_result_count(), 5);
    for (size_t i = 0; i < clnode_result_count(); ++i) {
        const char *n = clnode_result_name((clnode_result)i);
        assert_string_not_equal(n, "unknown");
        for (size_t j = 0; j < i; ++j)
            assert_string_not_equal(n, clnode_result_name((clnode_result)j));
    }
    assert_string_equal(clnode_result_name(CLNODE_RESULT_PRECISION_FLOOR), "precision_floor");
    assert_string_equal(clnode_result_name((clnode_result)clnode_result_count()), "unknown");
    assert_int_equal(clnode_activation_count(), 7);
    for (size_t i = 0; i < clnode_activation_count(); ++i) {
        const char *n = clnode_activation_name((clnode_activation)i);
        assert_string_not_equal(n, "unknown");
        clnode_activation a;
        assert_int_equal(clnode_activation_from_name(n, &a), CLNODE_OK);
        assert_int_equal(a, i);
    }
    assert_string_equal(clnode_activation_name(CLNODE_ACT_GELU), "gelu");
    assert_string_equal(clnode_activation_name((clnode_activation)clnode_activation_count()),
                        "unknown");
    clnode_activation a = CLNODE_ACT_TANH;
    assert_int_equal(clnode_activation_from_name("unknown", &a), CLNODE_ERR_INVALID_ARGUMENT);
}

/* A pass over a kept solve whose options follow the policy of every struct a program passes in
 * (one import, lib/core/internal.h's cln_struct_import): its struct's name and size, its sized
 * defaults function, and the pass run on the seed model's solve with options o (NULL: none). */
typedef struct sized_pass {
    const char *name;
    size_t size;
    void (*defaults)(void *o, size_t size);
    clnode_status (*run)(clnode_context *ctx, const clnode_model *m, const clnode_solution *sol,
                         const void *o);
} sized_pass;

static void gradient_defaults(void *o, size_t size)
{
    clnode_gradient_default_options_sized(o, size);
}

static clnode_status gradient_run(clnode_context *ctx, const clnode_model *m,
                                  const clnode_solution *sol, const void *o)
{
    const double cot[10] = {1.0};
    clnode_gradient *g = NULL;
    const clnode_status st = clnode_gradient_compute(ctx, m, o, sol, 1, cot, &g);
    assert_true(st == CLNODE_OK || g == NULL);
    clnode_gradient_destroy(&g);
    return st;
}

static void tangent_defaults(void *o, size_t size)
{
    clnode_tangent_default_options_sized(o, size);
}

static clnode_status tangent_run(clnode_context *ctx, const clnode_model *m,
                                 const clnode_solution *sol, const void *o)
{
    const double dy0[10] = {1.0};
    clnode_tangent *t = NULL;
    const clnode_status st = clnode_tangent_compute(ctx, m, o, sol, 1, 1, dy0, NULL, NULL, &t);
    assert_true(st == CLNODE_OK || t == NULL);
    clnode_tangent_destroy(&t);
    return st;
}

/* The defaults function records a newer program's size, which the pass then refuses as the solve
 * refuses its options, naming the struct; so is a size 0; the library's own size and none run. */
static void check_sized_pass(const sized_pass *p)
{
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const double y0[10] = {0};
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 1.0;
    o.keep_tape = 1;
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(1, y0), &sol), CLNODE_OK);
    old_struct s;
    memset(&s, 0, sizeof s);
    size_t *struct_size = (void *)s.bytes; /* every such struct's first field */
    char want[96];
    p->defaults(s.bytes, p->size + 8);
    assert_int_equal(*struct_size, p->size + 8);
    assert_int_equal(p->run(ctx, m, sol, s.bytes), CLNODE_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s: struct_size", p->name);
    assert_non_null(strstr(clnode_context_last_error(ctx), want));
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    *struct_size = 0;
    assert_int_equal(p->run(ctx, m, sol, s.bytes), CLNODE_ERR_INVALID_ARGUMENT);
    snprintf(want, sizeof want, "%s: struct_size 0", p->name);
    assert_non_null(strstr(clnode_context_last_error(ctx), want));
    p->defaults(s.bytes, p->size);
    assert_int_equal(*struct_size, p->size);
    assert_int_equal(p->run(ctx, m, sol, s.bytes), CLNODE_OK);
    assert_int_equal(p->run(ctx, m, sol, NULL), CLNODE_OK);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

/* The reverse pass's options (clnode_gradient_options). */
static void test_gradient_options_sized(void **state)
{
    (void)state;
    const sized_pass p = {"clnode_gradient_options", sizeof(clnode_gradient_options),
                          gradient_defaults, gradient_run};
    check_sized_pass(&p);
}

/* The tangent pass's options (clnode_tangent_options). */
static void test_tangent_options_sized(void **state)
{
    (void)state;
    const sized_pass p = {"clnode_tangent_options", sizeof(clnode_tangent_options),
                          tangent_defaults, tangent_run};
    check_sized_pass(&p);
}

/* clnode_gradient_compute_device's arrays (clnode_device_gradient) on the host backend: a
 * struct_size larger than the library's or 0 refused by name, its own size taken. */
static void test_device_gradient_sized(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    const double y0[10] = {0.5};
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.t1 = 1.0;
    o.keep_tape = 1;
    o.precision = CLNODE_FP64; /* the arrays hold doubles */
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(1, y0), &sol), CLNODE_OK);
    const size_t N = clnode_model_dim(m), P = clnode_solution_points(sol, 0);
    size_t np = 0;
    clnode_gradient *ref = NULL;
    double *cot = calloc(P * N + 1, sizeof *cot), *params = NULL;
    assert_non_null(cot);
    cot[0] = 1.0;
    assert_int_equal(clnode_gradient_compute(ctx, m, NULL, sol, P, cot, &ref), CLNODE_OK);
    clnode_gradient_params(ref, &np);
    params = calloc(np + 1, sizeof *params);
    assert_non_null(params);
    old_struct s;
    memset(&s, 0, sizeof s);
    clnode_device_gradient *g = (void *)s.bytes;
    clnode_device_gradient_default_sized(g, sizeof *g + 8);
    assert_int_equal(g->struct_size, sizeof *g + 8);
    g->slots = P;
    g->cot.handle = cot;
    g->params.handle = params;
    assert_int_equal(clnode_gradient_compute_device(ctx, m, NULL, sol, g),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "clnode_device_gradient: struct_size"));
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    g->struct_size = 0;
    assert_int_equal(clnode_gradient_compute_device(ctx, m, NULL, sol, g),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(
        strstr(clnode_context_last_error(ctx), "clnode_device_gradient: struct_size 0"));
    g->struct_size = sizeof *g;
    assert_int_equal(clnode_gradient_compute_device(ctx, m, NULL, sol, g), CLNODE_OK);
    assert_memory_equal(params, clnode_gradient_params(ref, NULL), np * sizeof *params);
    clnode_gradient_destroy(&ref);
    free(cot);
    free(params);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_write_only_the_old_fields),
        cmocka_unit_test(test_old_program_solves),
        cmocka_unit_test(test_old_problem_shares_its_save_times),
        cmocka_unit_test(test_old_model_desc),
        cmocka_unit_test(test_unknown_sizes_refused),
        cmocka_unit_test(test_gradient_options_sized),
        cmocka_unit_test(test_tangent_options_sized),
        cmocka_unit_test(test_device_gradient_sized),
        cmocka_unit_test(test_filled_structs_sized),
        cmocka_unit_test(test_library_structs_sized),
        cmocka_unit_test(test_name_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
