/* test_devices.c - the device-string grammar comes from one registry: every form the help text
 * lists is what the error for a malformed string lists, every device clnode_device_list names
 * opens, malformed strings of each backend are refused with CLNODE_ERR_NO_DEVICE before any
 * driver is asked, and the rule "tf32 only with fp32" holds at every door (solve, probe). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_device.h"
#include "test_problem.h"

static clnode_status open_device(const char *spec)
{
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = spec;
    clnode_context *ctx = NULL;
    const clnode_status st = clnode_context_create(&o, &ctx);
    clnode_context_destroy(&ctx);
    return st;
}

/* The message of a failed context creation reaches the logger (there is no context). */
static clnode_status open_logged(const char *spec, char *msg)
{
    clnode_context *ctx = NULL;
    const clnode_status st = test_context_logged(spec, msg, &ctx);
    clnode_context_destroy(&ctx);
    return st;
}

/* The help text lists host and host:openblas, and every form it lists appears in the error for
 * a malformed string, in the same order. */
static void test_help_and_errors_agree(void **state)
{
    (void)state;
    const size_t n = clnode_device_help(NULL, 0);
    assert_true(n > 0);
    char *help = malloc(n + 1);
    assert_non_null(help);
    assert_int_equal(clnode_device_help(help, n + 1), n);
    assert_int_equal(strlen(help), n);
    fputs(help ? help : "", stdout); /* help is non-NULL here (the compiler cannot tell) */
    assert_non_null(strstr(help, "  host "));
    assert_non_null(strstr(help, "  host:openblas "));
    assert_non_null(strstr(help, "  host:avx512 ")); /* the host's ISAs, runnable here or not */
    assert_non_null(strstr(help, "  host:avx2 "));
    assert_non_null(strstr(help, "  host:portable "));
    char small[8];
    assert_int_equal(clnode_device_help(small, sizeof small), n); /* truncated, NUL-terminated */
    assert_int_equal(strlen(small), sizeof small - 1);

    char msg[TEST_LOG_MSG];
    assert_int_equal(open_logged("host:nonsense", msg), CLNODE_ERR_NO_DEVICE);
    const char *list = strstr(msg, "expected one of ");
    assert_non_null(list);
    /* each form of the help, in order, in the error's list */
    const char *pos = list;
    for (const char *line = help; *line; line = strchr(line, '\n') + 1) {
        char form[64];
        if (sscanf(line, " %63s", form) != 1)
            break;
        if (strstr(line, "not built")) /* a backend of another build: named, without forms */
            continue;
        const char *at = strstr(pos, form);
        assert_non_null(at);
        pos = at + strlen(form);
    }
    free(help);
}

static void test_malformed_refused(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "hots",       "host:",    "host:0",       "host:cpu",          "opencl:",
        "opencl:1:2", "cuda:x",   "cuda:0:x",     "cuda:cublas:0",     "cuda:0:cublas:1",
        ":host",      "opencl::", "host:avx1024", "host:openblas:avx2"};
    char msg[TEST_LOG_MSG];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        const clnode_status st = open_logged(bad[i], msg);
        printf("%-16s %s: %s\n", bad[i], clnode_status_name(st), msg);
        assert_int_equal(st, CLNODE_ERR_NO_DEVICE);
        assert_non_null(strstr(msg, "unknown device"));
    }
}

/* Every device of the list opens under its own string; a backend that is built but not
 * available says why, in the list and when it is opened. */
static void test_listed_devices_open(void **state)
{
    (void)state;
    clnode_device_list *l = NULL;
    assert_int_equal(clnode_device_list_create(NULL, NULL, &l), CLNODE_OK);
    for (size_t i = 0; i < clnode_device_list_count(l); ++i) {
        const clnode_device_info *d = clnode_device_list_get(l, i);
        printf("open %s\n", d->spec);
        assert_int_equal(open_device(d->spec), CLNODE_OK);
    }
    /* every backend is described, built or not */
    assert_int_equal(clnode_device_list_num_backends(l), 3);
    assert_string_equal(clnode_device_list_backend(l, 0)->name, "host");
    assert_string_equal(clnode_device_list_backend(l, 1)->name, "opencl");
    assert_string_equal(clnode_device_list_backend(l, 2)->name, "cuda");
    assert_int_equal(clnode_device_list_num_backends(NULL), 0);
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        char msg[TEST_LOG_MSG];
        const clnode_status st = open_logged(b->name, msg);
        if (b->built && strncmp(b->note, "not available: ", 15) == 0) {
            assert_int_equal(st, CLNODE_ERR_NO_DEVICE);
            assert_non_null(strstr(msg, b->note + 15));
        } else if (!b->built) {
            assert_int_equal(st, CLNODE_ERR_UNSUPPORTED);
        }
        if (strcmp(b->name, "host") == 0)
            assert_int_equal(b->capabilities & CLNODE_BACKEND_FP64, CLNODE_BACKEND_FP64);
    }
    clnode_device_list_destroy(&l);
}

static void test_tf32_only_fp32(void **state)
{
    (void)state;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    assert_int_equal(clnode_context_create(NULL, &ctx), CLNODE_OK);
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.precision = CLNODE_FP64;
    o.gemm_precision = CLNODE_GEMM_TF32;
    const double y0[10] = {0};
    clnode_solution *s = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(1, y0), &s),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "tf32"));
    clnode_probe_result r;
    assert_int_equal(clnode_probe_gemm(ctx, CLNODE_FP64, CLNODE_GEMM_TF32, &r),
                     CLNODE_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(clnode_context_last_error(ctx), "tf32"));
    o.precision = CLNODE_FP32;
    assert_int_equal(clnode_solve(ctx, m, &o, TEST_PROBLEM(1, y0), &s), CLNODE_OK);
    clnode_solution_destroy(&s);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_and_errors_agree),
        cmocka_unit_test(test_malformed_refused),
        cmocka_unit_test(test_listed_devices_open),
        cmocka_unit_test(test_tf32_only_fp32),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
