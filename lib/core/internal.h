/* internal.h - what every library source shares: the context internals, error reporting and the
 * check macros. Not installed. */
#ifndef CLN_INTERNAL_H
#define CLN_INTERNAL_H

#include <stddef.h>
#include <string.h>

#include "clnode.h"

typedef struct cln_backend cln_backend;

/* A context's settings for white-box tests (tests/backend), set on the context (ctx->test) before
 * its solves; 0, the default, in each: none.
 * - steps_cap_first: the saved steps' first capacity, points per trajectory (else the solver's
 *   choice; always at most max_steps): 1 makes a solve grow its saved steps through many
 *   doublings, max_steps gives every trajectory room for every step up front (no growth).
 * - rev_max_blocks: the most blocks a group of a device's reverse pass takes, so that a test's
 *   batch runs in several groups.
 * - rev_memory: the device memory the reverse pass's group size is chosen for, in bytes.
 * - rev_sums: the device reverse pass's weight sums (1: the one kernel, 2: the GEMM; else the
 *   backend's, cln_dev_launch.rev_sums_by_gemm, for groups of a few blocks).
 * - rev_fused: the device reverse pass's products of strict GEMM mode (1: its own kernels with
 *   the element-wise work inside them, whatever the rows; 2: the backend's GEMM and element-wise
 *   launches; else the backend's rule, cln_dev_launch.rev_fused_rows). */
typedef struct cln_test_settings {
    size_t steps_cap_first;
    size_t rev_max_blocks;
    size_t rev_memory;
    int rev_sums;
    int rev_fused;
} cln_test_settings;

struct clnode_context {
    clnode_log_fn log;
    void *log_user;
    clnode_log_level log_level;
    cln_backend *backend; /* the device this context is bound to */
    int num_threads;      /* clnode_context_options.num_threads (host backend) */
    /* GEMM probe results per [precision == fp64][mode == tf32], measured on first use */
    clnode_probe_result probe[2][2];
    unsigned char probe_done[2][2];
    /* the probe cache file's results, read once when the context is created (file reads and
     * parsing stay out of the first solve); used on first use in place of reading the file */
    clnode_probe_result probe_file[2][2];
    unsigned char probe_file_ok[2][2];
    long last_native;
    char last_error[1024];
    cln_test_settings test; /* all 0 unless a white-box test sets them */
};

/* Logs a message about `code` (CLNODE_LOG_GENERAL unless a program is to recognise it) through
 * the context's logger (printf-style). ctx may be NULL. */
void cln_log(const clnode_context *ctx, clnode_log_level level, clnode_log_code code,
             const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A kernel build that no cache of the context holds (an OpenCL program, CLBlast's kernels for
 * the first GEMM of a precision, an NVRTC compile): cln_build_begin logs one line with the code
 * CLNODE_LOG_BUILD (level INFO) before it starts, naming the device and `what` it builds, and
 * returns the time; cln_build_end logs its time when done (ok: it succeeded; a failure says so,
 * its error is returned by the caller). The first build on a device can take a minute. */
double cln_build_begin(const clnode_context *ctx, const char *device, const char *what);
void cln_build_end(const clnode_context *ctx, const char *device, const char *what, double start,
                   int ok);

/* Records `status` with a formatted message as the context's last error, logs it at ERROR level
 * with the source location, and returns `status`. ctx may be NULL (then it is only returned). */
clnode_status cln_fail_at(clnode_context *ctx, clnode_status status, const char *file, int line,
                          const char *fmt, ...) __attribute__((format(printf, 5, 6)));
#define cln_fail(ctx, status, ...) cln_fail_at((ctx), (status), __FILE__, __LINE__, __VA_ARGS__)

/* cln_fail_at for a failed call of a native API (OpenCL, CLBlast, the CUDA runtime, cuBLAS,
 * NVRTC): also records its raw code `native` as the context's last native error
 * (clnode_context_last_native_error). The one place a backend's native code is recorded. */
clnode_status cln_fail_native_at(clnode_context *ctx, long native, clnode_status status,
                                 const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
#define cln_fail_native(ctx, native, status, ...)                                                  \
    cln_fail_native_at((ctx), (native), (status), __FILE__, __LINE__, __VA_ARGS__)

/* Clears the last error (called at the start of each public entry point). */
void cln_clear_error(clnode_context *ctx);

/* Returns from the enclosing function with `status` and a message if `cond` is false. */
#define CLN_CHECK(ctx, cond, status, ...)                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return cln_fail((ctx), (status), __VA_ARGS__);                                         \
    } while (0)

/* Evaluates an expression returning clnode_status; on failure stores it in `st` and jumps to
 * `fail` (the one cleanup label of a constructor). */
#define CLN_TRY(st, expr)                                                                          \
    do {                                                                                           \
        (st) = (expr);                                                                             \
        if ((st) != CLNODE_OK)                                                                     \
            goto fail;                                                                             \
    } while (0)

/* Overflow-checked size arithmetic: returns 0 on overflow, 1 otherwise. */
static inline int cln_mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > (size_t)-1 / a)
        return 0;
    *out = a * b;
    return 1;
}
static inline int cln_add_size(size_t a, size_t b, size_t *out)
{
    if (b > (size_t)-1 - a)
        return 0;
    *out = a + b;
    return 1;
}

/* The rule that ties GEMM modes to precisions, stated once (context.c): strict in any precision,
 * tf32 in fp32 only. CLNODE_ERR_INVALID_ARGUMENT for an unknown precision or mode, or tf32 with
 * fp64. */
clnode_status cln_check_gemm_mode(clnode_context *ctx, clnode_precision prec,
                                  clnode_gemm_mode mode);

/* ---- struct sizes: the compatibility policy of clnode/common.h ---- */

/* The end of `member` in `type`. */
#define CLN_END_OF(type, member) (offsetof(type, member) + sizeof(((type *)0)->member))

/* The smallest size of each struct a program passes in: its size in the first release that
 * carried its size, up to and with its last field then. These never change when fields are
 * appended (sizeof grows, these stay). */
#define CLN_SOLVE_OPTIONS_MIN CLN_END_OF(clnode_solve_options, compact)
#define CLN_CONTEXT_OPTIONS_MIN CLN_END_OF(clnode_context_options, log_level)
#define CLN_TRAJECTORY_STATS_MIN CLN_END_OF(clnode_trajectory_stats, t_final)
#define CLN_PROBE_RESULT_MIN CLN_END_OF(clnode_probe_result, unit_roundoff)
#define CLN_DEVICE_FACTS_MIN CLN_END_OF(clnode_device_facts, correctly_rounded_div_sqrt)
#define CLN_MODEL_DESC_MIN CLN_END_OF(clnode_model_desc, num_inputs)
#define CLN_PROBLEM_MIN CLN_END_OF(clnode_problem, n_save_ts)

/* Whether a struct of `size` bytes from the program is one this library knows (min to max):
 * CLNODE_OK, or CLNODE_ERR_INVALID_ARGUMENT with a message naming `what`. */
clnode_status cln_check_struct_size(clnode_context *ctx, const char *what, size_t size, size_t min,
                                    size_t max);

/* The fields two versions of a struct have in common: the first min(dst_size, src_size) bytes. */
static inline void cln_struct_copy(void *dst, size_t dst_size, const void *src, size_t src_size)
{
    memcpy(dst, src, dst_size < src_size ? dst_size : src_size);
}

/* A struct the library fills in the program's memory of `size` bytes (its defaults, or a result)
 * from `full`, this library's struct of full_size bytes, struct_size first: the first min(size,
 * full_size) bytes, with struct_size = size. A result's size is checked first
 * (cln_check_struct_size). */
static inline void cln_struct_fill(void *dst, size_t size, void *full, size_t full_size)
{
    memcpy(full, &size, sizeof size);
    cln_struct_copy(dst, size, full, full_size);
}

/* Defines the defaults function `void name(type *out, size_t size)` of a struct the program
 * fills: this library's defaults (defaults(&d)) written to the program's `size` bytes
 * (cln_struct_fill). */
#define CLN_DEFAULTS_SIZED(name, type, defaults)                                                   \
    void name(type *out, size_t size)                                                              \
    {                                                                                              \
        if (!out)                                                                                  \
            return;                                                                                \
        type d;                                                                                    \
        defaults(&d);                                                                              \
        cln_struct_fill(out, size, &d, sizeof d);                                                  \
    }

/* The one import of a struct the program passes in (`in`, struct_size first; NULL: none) over
 * `full`, this library's struct of full_size bytes holding its defaults: the fields the program's
 * struct_size covers, then struct_size = full_size. CLNODE_OK (in NULL too), or
 * CLNODE_ERR_INVALID_ARGUMENT naming `what` for a size this library does not know (min to
 * full_size bytes, cln_check_struct_size), `full` then left as it was. */
clnode_status cln_struct_import(clnode_context *ctx, const char *what, const void *in, size_t min,
                                void *full, size_t full_size);

/* The most layers a model has (the model room's struct, lib/model/model.h, and every backend's
 * per-layer arrays). */
#define CLN_MAX_LAYERS 64

/* The smallest magnitude that rounds to infinity in float: the midpoint between FLT_MAX and
 * 2^128 (round to nearest even takes it up). A double x stays finite in float iff
 * fabs(x) < CLN_FP32_LIMIT. */
#define CLN_FP32_LIMIT 0x1.ffffffp127

#endif /* CLN_INTERNAL_H */
