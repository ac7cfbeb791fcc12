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
#include <stdlib.h>
#include <string.h>

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

/* Whether `device` is one that this run must have: CLNODE_REQUIRE_DEVICES lists them, separated
 * by commas (scripts/test.sh: "host,opencl:pocl,opencl:oclgrind"). An entry matches a device string
 * equal to it, and a bare backend ("opencl") matches each of that backend's devices either way:
 * a test of "opencl" (any OpenCL device) that finds none fails where "opencl:pocl" is required. */
static inline int test_device_required(const char *device)
{
    const char *list = getenv("CLNODE_REQUIRE_DEVICES");
    const size_t dlen = strlen(device);
    const char *dcolon = strchr(device, ':');
    const size_t dback = dcolon ? (size_t)(dcolon - device) : dlen;
    while (list && *list) {
        const char *end = strchr(list, ',');
        const size_t n = end ? (size_t)(end - list) : strlen(list);
        const char *colon = memchr(list, ':', n);
        const size_t back = colon ? (size_t)(colon - list) : n;
        if ((n == dlen && memcmp(list, device, n) == 0) ||
            ((!colon || !dcolon) && back == dback && memcmp(list, device, back) == 0))
            return 1;
        list = end ? end + 1 : NULL;
    }
    return 0;
}

/* What main() returns when `device` is absent (`why` says how): TEST_SKIPPED, or 1 where the run
 * requires the device (test_device_required). Says which on stdout. */
static inline int test_device_absent(const char *device, const char *why)
{
    if (test_device_required(device)) {
        printf("FAIL: device %s is required here (CLNODE_REQUIRE_DEVICES=%s) but not available: "
               "%s\n",
               device, getenv("CLNODE_REQUIRE_DEVICES"), why);
        return 1;
    }
    printf("device %s is not available here (%s): skipped\n", device, why);
    return TEST_SKIPPED;
}

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
    if (st == CLNODE_ERR_NO_DEVICE || st == CLNODE_ERR_UNSUPPORTED)
        return test_device_absent(*device, clnode_status_string(st));
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

/* The size of the message buffer test_context_logged keeps a context's last log message in. */
#define TEST_LOG_MSG 1024

/* A log callback that keeps the last message in `user` (TEST_LOG_MSG bytes). */
static inline void test_keep_last_log(void *user, clnode_log_level level, clnode_log_code code,
                                      const char *msg)
{
    (void)code;
    (void)level;
    snprintf(user, TEST_LOG_MSG, "%s", msg);
}

/* clnode_context_create on `spec` with its log messages kept in msg (TEST_LOG_MSG bytes, emptied
 * first): the last one is the reason of a refusal. */
static inline clnode_status test_context_logged(const char *spec, char *msg, clnode_context **ctx)
{
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.device = spec;
    o.log = test_keep_last_log;
    o.log_user = msg;
    msg[0] = '\0';
    return clnode_context_create(&o, ctx);
}

#endif /* CLNODE_TEST_DEVICE_H */
