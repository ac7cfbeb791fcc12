/* test_device.h - the context of a per-device test: the device named on the command line (meson
 * passes it, "host" or "opencl:pocl" or "cuda"), opened once in main().
 *
 *     int main(int argc, char **argv)
 *     {
 *         const int dev_rc = test_device_open(argc, argv, &g_device, NULL, "conformance", &g_ctx);
 *         if (dev_rc != 0)
 *             return dev_rc;
 *         ...
 */
#ifndef CLNODE_TEST_DEVICE_H
#define CLNODE_TEST_DEVICE_H

#include <stdio.h>

#include "clnode.h"

/* Fails the running cmocka test unless `expr` returns CLNODE_OK, naming the call, the status and
 * the message of the test's context `g_ctx` (every per-device test keeps its context there). */
#define assert_ok(expr)                                                                            \
    do {                                                                                           \
        clnode_status st_ = (expr);                                                                \
        if (st_ != CLNODE_OK)                                                                      \
            fail_msg("%s returned %s: %s", #expr, clnode_status_name(st_),                         \
                     clnode_context_last_error(g_ctx));                                            \
    } while (0)

/* The exit status that tells meson a test was skipped. */
#define TEST_SKIPPED 77

/* Opens *ctx on argv[1] if given (and stores it in *device), else on *device, with the logger
 * `log` (NULL: none) at log_level (the library's default when negative), and prints "WHAT on
 * BACKEND: DEVICE" (nothing when `what` is NULL). Returns 0 with *ctx open, or the status main()
 * returns: TEST_SKIPPED where the device is absent or its backend not built, 1 for any other
 * failure (both said on stdout). */
static inline int test_device_open_at(int argc, char **argv, const char **device, clnode_log_fn log,
                                      int log_level, const char *what, clnode_context **ctx)
{
    if (argc > 1)
        *device = argv[1];
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = *device;
    co.log = log;
    if (log_level >= 0)
        co.log_level = (clnode_log_level)log_level;
    const clnode_status st = clnode_context_create(&co, ctx);
    if (st == CLNODE_ERR_NO_DEVICE || st == CLNODE_ERR_UNSUPPORTED) {
        printf("device %s is not available here: skipped\n", *device);
        return TEST_SKIPPED;
    }
    if (st != CLNODE_OK) {
        printf("cannot create a context on %s: %s\n", *device, clnode_status_string(st));
        return 1;
    }
    if (what)
        printf("%s on %s: %s\n", what, clnode_context_backend(*ctx), clnode_context_device(*ctx));
    return 0;
}

/* test_device_open_at at the library's default log level. */
static inline int test_device_open(int argc, char **argv, const char **device, clnode_log_fn log,
                                   const char *what, clnode_context **ctx)
{
    return test_device_open_at(argc, argv, device, log, -1, what, ctx);
}

#endif /* CLNODE_TEST_DEVICE_H */
