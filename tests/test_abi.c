/* test_abi.c - the structs a program passes grow without breaking programs built against an older
 * release (clnode/common.h): a program whose structs end at the first release's last field gets
 * exactly those bytes written and nothing past them, its options are read up to its struct_size
 * with the defaults for the rest, and a struct larger than the library knows, or one never given
 * its defaults (struct_size 0), is refused. Oracle: canary bytes past the old end, and the solve
 * of the full struct. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"

#define END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))
/* the first release's structs end here (their last fields then) */
#define OPTS_V1 END_OF(clnode_solve_options, precision_guard)
#define CTX_V1 END_OF(clnode_context_options, log_level)
#define STATS_V1 END_OF(clnode_trajectory_stats, t_final)
#define PROBE_V1 END_OF(clnode_probe_result, unit_roundoff)
#define FACTS_V1 END_OF(clnode_device_facts, correctly_rounded_div_sqrt)

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

    clnode_solve_options full;
    clnode_solve_default_options(&full);
    assert_int_equal(full.struct_size, sizeof full);
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
    assert_int_equal(clnode_solve(ctx, m, old, 1, y0, &a), CLNODE_OK);
    clnode_solve_options full;
    clnode_solve_seed_options(&full);
    assert_int_equal(clnode_solve(ctx, m, &full, 1, y0, &b), CLNODE_OK);

    old_struct st;
    canary(&st, 0);
    assert_int_equal(
        clnode_solution_stats_sized(a, 0, (clnode_trajectory_stats *)(void *)st.bytes, STATS_V1),
        CLNODE_OK);
    assert_true(canary_intact(&st, STATS_V1));
    clnode_trajectory_stats sb;
    assert_int_equal(clnode_solution_stats(b, 0, &sb), CLNODE_OK);
    assert_int_equal(((const clnode_trajectory_stats *)(const void *)st.bytes)->num_steps, 13);
    assert_int_equal(sb.num_steps, 13);
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
    assert_int_equal(clnode_solve(ctx, m, o, 1, y0, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "newer clnode"));
    o->struct_size = 0;
    assert_int_equal(clnode_solve(ctx, m, o, 1, y0, &sol), CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "struct_size 0"));
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
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_write_only_the_old_fields),
        cmocka_unit_test(test_old_program_solves),
        cmocka_unit_test(test_unknown_sizes_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
