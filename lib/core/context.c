/* lib/core/: what every part of the library shares and which calls none of them: the context's
 * fields, status codes, logging and errors (internal.h). */
/* context.c - status strings, version, names, logging, errors and struct sizes: the core every
 * other part of the library calls, and which calls none of them (a context is created and
 * destroyed with its backend in backends/context.c). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/internal.h"

/* ---- status codes, version, names ---- */

const char *clnode_status_name(clnode_status status)
{
    switch (status) {
#define CLN_X_NAME(name, value, msg)                                                               \
    case name:                                                                                     \
        return #name;
        CLNODE_STATUS_LIST(CLN_X_NAME)
#undef CLN_X_NAME
    }
    return "CLNODE_UNKNOWN_STATUS";
}

const char *clnode_status_string(clnode_status status)
{
    switch (status) {
#define CLN_X_MSG(name, value, msg)                                                                \
    case name:                                                                                     \
        return msg;
        CLNODE_STATUS_LIST(CLN_X_MSG)
#undef CLN_X_MSG
    }
    return "unknown status";
}

const char *clnode_log_code_name(clnode_log_code code)
{
    switch (code) {
#define CLN_X_NAME(name, value, str)                                                               \
    case name:                                                                                     \
        return str;
        CLNODE_LOG_CODE_LIST(CLN_X_NAME)
#undef CLN_X_NAME
    }
    return "unknown";
}

const char *clnode_version_string(void)
{
    return CLNODE_VERSION_STRING;
}

unsigned clnode_version_number(void)
{
    return CLNODE_VERSION_NUMBER;
}

const char *clnode_precision_name(clnode_precision precision)
{
    switch (precision) {
    case CLNODE_FP32:
        return "fp32";
    case CLNODE_FP64:
        return "fp64";
    }
    return "unknown";
}

const char *clnode_gemm_mode_name(clnode_gemm_mode mode)
{
    switch (mode) {
    case CLNODE_GEMM_STRICT:
        return "strict";
    case CLNODE_GEMM_TF32:
        return "tf32";
    }
    return "unknown";
}

/* The rule that ties GEMM modes to precisions, stated once (internal.h). */
clnode_status cln_check_gemm_mode(clnode_context *ctx, clnode_precision prec, clnode_gemm_mode mode)
{
    CLN_CHECK(ctx, prec == CLNODE_FP32 || prec == CLNODE_FP64, CLNODE_ERR_INVALID_ARGUMENT,
              "unknown precision %d", (int)prec);
    CLN_CHECK(ctx, mode == CLNODE_GEMM_STRICT || mode == CLNODE_GEMM_TF32,
              CLNODE_ERR_INVALID_ARGUMENT, "unknown GEMM mode %d", (int)mode);
    CLN_CHECK(ctx, mode != CLNODE_GEMM_TF32 || prec == CLNODE_FP32, CLNODE_ERR_INVALID_ARGUMENT,
              "the tf32 GEMM mode applies to fp32 only (not %s)", clnode_precision_name(prec));
    return CLNODE_OK;
}

/* ---- logging and errors ---- */

static void cln_vlog(clnode_log_fn log, void *user, clnode_log_level max, clnode_log_level level,
                     clnode_log_code code, const char *fmt, va_list ap)
{
    if (!log || level > max)
        return;
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    log(user, level, code, buf);
}

void cln_log(const clnode_context *ctx, clnode_log_level level, clnode_log_code code,
             const char *fmt, ...)
{
    if (!ctx)
        return;
    va_list ap;
    va_start(ap, fmt);
    cln_vlog(ctx->log, ctx->log_user, ctx->log_level, level, code, fmt, ap);
    va_end(ap);
}

static double cln_build_now(void)
{
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double cln_build_begin(const clnode_context *ctx, const char *device, const char *what)
{
    cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_BUILD, "building %s for %s", what, device);
    return cln_build_now();
}

void cln_build_end(const clnode_context *ctx, const char *device, const char *what, double start,
                   int ok)
{
    cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_BUILD, "%s %s for %s in %.1f s",
            ok ? "built" : "failed to build", what, device, cln_build_now() - start);
}

clnode_status cln_fail_at(clnode_context *ctx, clnode_status status, const char *file, int line,
                          const char *fmt, ...)
{
    if (!ctx)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->last_error, sizeof ctx->last_error, fmt, ap);
    va_end(ap);
    /* the source location is for whoever debugs clnode: only at the debug level */
    if (ctx->log_level >= CLNODE_LOG_DEBUG)
        cln_log(ctx, CLNODE_LOG_ERROR, CLNODE_LOG_GENERAL, "%s (%s) [%s:%d]", ctx->last_error,
                clnode_status_name(status), file, line);
    else
        cln_log(ctx, CLNODE_LOG_ERROR, CLNODE_LOG_GENERAL, "%s", ctx->last_error);
    return status;
}

clnode_status cln_fail_native_at(clnode_context *ctx, long native, clnode_status status,
                                 const char *file, int line, const char *fmt, ...)
{
    if (!ctx)
        return status;
    char msg[sizeof ctx->last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ctx->last_native = native;
    return cln_fail_at(ctx, status, file, line, "%s", msg);
}

clnode_status cln_check_struct_size(clnode_context *ctx, const char *what, size_t size, size_t min,
                                    size_t max)
{
    CLN_CHECK(ctx, size >= min && size <= max, CLNODE_ERR_INVALID_ARGUMENT,
              "%s: struct_size %zu is not a size this clnode knows (%zu to %zu bytes): fill the "
              "struct with its defaults function first%s",
              what, size, min, max,
              size > max ? " (the program was built against a newer clnode)" : "");
    return CLNODE_OK;
}

clnode_status cln_struct_import(clnode_context *ctx, const char *what, const void *in, size_t min,
                                void *full, size_t full_size)
{
    if (!in)
        return CLNODE_OK;
    size_t size;
    memcpy(&size, in, sizeof size);
    const clnode_status st = cln_check_struct_size(ctx, what, size, min, full_size);
    if (st != CLNODE_OK)
        return st;
    cln_struct_copy(full, full_size, in, size);
    memcpy(full, &full_size, sizeof full_size);
    return CLNODE_OK;
}

void cln_clear_error(clnode_context *ctx)
{
    if (ctx) {
        ctx->last_error[0] = '\0';
        ctx->last_native = 0;
    }
}

/* ---- a context's last error ---- */

const char *clnode_context_last_error(const clnode_context *ctx)
{
    return ctx ? ctx->last_error : "";
}

long clnode_context_last_native_error(const clnode_context *ctx)
{
    return ctx ? ctx->last_native : 0;
}
