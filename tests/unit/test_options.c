/* test_options.c - the solve options' one table (CLNODE_SOLVE_OPTION_LIST): the defaults the
 * library writes are the table's; every option is found by name, set, read, formatted and parsed
 * back to the same value; values outside an option's type or range are refused with a message
 * naming the option and leave the options unchanged; and a value that clnode_solve_option_set
 * refuses is refused by clnode_solve as well when written straight into the struct. Oracles:
 * the table's own columns, expanded here from the public header, against what the library's
 * functions report. */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"

/* the names, in the table's order, as the header's rows give them */
static const char *const row_names[] = {
#define ROW_NAME(ctype, name, type, where, def, min, max, flags, doc) #name,
    CLNODE_SOLVE_OPTION_LIST(ROW_NAME)
#undef ROW_NAME
};
#define NUM_ROWS (sizeof row_names / sizeof row_names[0])

static void test_table_matches_rows(void **state)
{
    (void)state;
    assert_int_equal(clnode_solve_option_count(), NUM_ROWS);
    assert_null(clnode_solve_option_at(NUM_ROWS));
    for (size_t i = 0; i < NUM_ROWS; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        assert_non_null(in);
        assert_string_equal(in->name, row_names[i]);
        assert_ptr_equal(clnode_solve_option_find(row_names[i]), in);
        assert_non_null(in->doc);
        assert_true(strlen(in->doc) > 8);
        assert_true(in->type != CLNODE_OPTION_CHOICE || in->n_choices >= 2);
        for (size_t j = 0; j < i; ++j) /* one name each */
            assert_string_not_equal(row_names[j], row_names[i]);
    }
    assert_null(clnode_solve_option_find("no_such_option"));
    assert_null(clnode_solve_option_find(NULL));
}

/* The struct's fields are the rows' (the struct is expanded from them), and the defaults the
 * library writes are the table's default column, read back through the table. */
static void test_defaults_are_the_table(void **state)
{
    (void)state;
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    for (size_t i = 0; i < NUM_ROWS; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        double v = NAN;
        assert_int_equal(clnode_solve_option_get(&o, in->name, &v), CLNODE_OK);
        assert_true(v == in->default_value);
    }
    assert_ptr_equal(o.method, clnode_method_tsit5);
    assert_true(o.rtol == 1e-3 && o.atol == 1e-6 && o.max_steps == 4096 && o.save_t1 == 1);
    assert_int_equal(o.precision, CLNODE_FP32);
    assert_int_equal(o.gemm_precision, CLNODE_GEMM_STRICT);
    assert_int_equal(o.precision_guard, CLNODE_GUARD_WARN);
}

/* A valid value other than the default for option `in`. */
static double other_value(const clnode_option_info *in)
{
    switch (in->type) {
    case CLNODE_OPTION_BOOLEAN:
        return in->default_value == 0.0 ? 1.0 : 0.0;
    case CLNODE_OPTION_CHOICE:
        return in->choice_values[in->choice_values[0] == (int)in->default_value ? 1 : 0];
    case CLNODE_OPTION_METHOD:
        return in->default_value == 1.0 ? 2.0 : 1.0;
    default: {
        double v = in->default_value == 0.0 ? 0.375 : in->default_value * 0.75;
        if (in->type == CLNODE_OPTION_INTEGER)
            v = floor(v);
        if (v < in->min || (v == in->min && (in->flags & CLNODE_OPTION_MIN_OPEN)))
            v = in->max < DBL_MAX ? in->max : in->min + 1.0;
        return v;
    }
    }
}

static void test_set_get_format_parse(void **state)
{
    (void)state;
    for (size_t i = 0; i < NUM_ROWS; ++i) {
        const clnode_option_info *in = clnode_solve_option_at(i);
        clnode_solve_options o, p;
        clnode_solve_default_options(&o);
        clnode_solve_default_options(&p);
        const double v = other_value(in);
        char msg[256] = "", text[64];
        assert_int_equal(clnode_solve_option_set(&o, in->name, v, msg, sizeof msg), CLNODE_OK);
        double back = NAN;
        assert_int_equal(clnode_solve_option_get(&o, in->name, &back), CLNODE_OK);
        assert_true(back == v);
        assert_int_equal(clnode_solve_option_format(&o, in->name, text, sizeof text), CLNODE_OK);
        assert_int_equal(clnode_solve_option_parse(&p, in->name, text, msg, sizeof msg),
                         CLNODE_OK);
        assert_memory_equal(&o, &p, sizeof o); /* the same struct, byte for byte */
        /* a buffer too small for the text is refused, never truncated silently */
        assert_int_equal(clnode_solve_option_format(&o, in->name, text, 1),
                         CLNODE_ERR_INVALID_ARGUMENT);
    }
}

/* Values outside an option's type or range: refused, named, the struct unchanged. */
static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double v;
    } bad[] = {
        {"rtol", 0.0},          {"rtol", -1e-3},      {"rtol", INFINITY},    {"atol", NAN},
        {"factormin", 0.0},     {"factormin", 1.5},   {"factormax", 0.5},    {"safety", 0.0},
        {"safety", 1.0000001},  {"dtmin", -1.0},      {"dtmax", INFINITY},   {"t0", NAN},
        {"t1", -INFINITY},      {"max_steps", 0.0},   {"max_steps", 2.5},    {"max_steps", 2147483648.0},
        {"save_t0", 2.0},       {"compact", 0.5},     {"precision", 16.0},   {"gemm_precision", 2.0},
        {"precision_guard", 3}, {"method", 99.0},     {"method", -1.0},      {"pcoeff", NAN},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; ++k) {
        clnode_solve_options o, before;
        clnode_solve_default_options(&o);
        before = o;
        char msg[256] = "";
        assert_int_equal(clnode_solve_option_set(&o, bad[k].name, bad[k].v, msg, sizeof msg),
                         CLNODE_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(msg, bad[k].name));
        assert_memory_equal(&o, &before, sizeof o);
    }
    static const struct {
        const char *name, *text;
    } bad_text[] = {
        {"rtol", "abc"},          {"rtol", "1e-3x"},       {"rtol", " 1e-3"},       {"rtol", ""},     {"rtol", "1e999"},
        {"max_steps", "12.5"},    {"save_steps", "maybe"}, {"method", "rk4"}, {"precision", "fp16"},
        {"gemm_precision", "bf16"}, {"precision_guard", "ignore"},
    };
    for (size_t k = 0; k < sizeof bad_text / sizeof bad_text[0]; ++k) {
        clnode_solve_options o;
        clnode_solve_default_options(&o);
        char msg[256] = "";
        assert_int_equal(
            clnode_solve_option_parse(&o, bad_text[k].name, bad_text[k].text, msg, sizeof msg),
            CLNODE_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(msg, bad_text[k].name));
    }
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    char msg[256] = "";
    assert_int_equal(clnode_solve_option_set(&o, "rtoll", 1e-3, msg, sizeof msg),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(msg, "rtoll"));
    assert_int_equal(clnode_solve_option_parse(&o, "method", "dopri5", NULL, 0), CLNODE_OK);
    assert_ptr_equal(o.method, clnode_method_dopri5);
    assert_int_equal(clnode_solve_option_parse(&o, "save_t0", "yes", NULL, 0), CLNODE_OK);
    assert_int_equal(o.save_t0, 1);
    assert_int_equal(clnode_solve_option_parse(&o, "precision", "fp64", NULL, 0), CLNODE_OK);
    assert_int_equal(o.precision, CLNODE_FP64);
}

/* What the table refuses, clnode_solve refuses too when the value is written into the struct
 * directly (the library validates every option from the same table). */
static void test_solve_validates_from_the_table(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &model), CLNODE_OK);
    static const struct {
        const char *name;
        size_t offset;
    } reals[] = {
        {"rtol", offsetof(clnode_solve_options, rtol)},
        {"atol", offsetof(clnode_solve_options, atol)},
        {"factormin", offsetof(clnode_solve_options, factormin)},
        {"factormax", offsetof(clnode_solve_options, factormax)},
        {"safety", offsetof(clnode_solve_options, safety)},
        {"dtmin", offsetof(clnode_solve_options, dtmin)},
        {"dtmax", offsetof(clnode_solve_options, dtmax)},
        {"pcoeff", offsetof(clnode_solve_options, pcoeff)},
        {"max_steps", 0},
    };
    double y0[10] = {0};
    for (size_t k = 0; k < sizeof reals / sizeof reals[0]; ++k) {
        clnode_solve_options o;
        clnode_solve_seed_options(&o);
        if (reals[k].offset == 0)
            o.max_steps = 0;
        else
            memcpy((char *)&o + reals[k].offset, &(double){NAN}, sizeof(double));
        clnode_solution *sol = NULL;
        assert_int_equal(clnode_solve(ctx, model, &o, TEST_PROBLEM(1, y0), &sol),
                         CLNODE_ERR_INVALID_ARGUMENT);
        assert_null(sol);
        assert_non_null(strstr(clnode_context_last_error(ctx), reals[k].name));
    }
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table_matches_rows),
        cmocka_unit_test(test_defaults_are_the_table),
        cmocka_unit_test(test_set_get_format_parse),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_solve_validates_from_the_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
