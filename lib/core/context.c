/* context.c - contexts, device selection, status strings, version and logging. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"

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

/* ---- logging and errors ---- */

static void cln_vlog(clnode_log_fn log, void *user, clnode_log_level max, clnode_log_level level,
                     const char *fmt, va_list ap)
{
    if (!log || level > max)
        return;
    char buf[2048];
    vsnprintf(buf, sizeof buf, fmt, ap);
    log(user, level, buf);
}

void cln_log(const clnode_context *ctx, clnode_log_level level, const char *fmt, ...)
{
    if (!ctx)
        return;
    va_list ap;
    va_start(ap, fmt);
    cln_vlog(ctx->log, ctx->log_user, ctx->log_level, level, fmt, ap);
    va_end(ap);
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
        cln_log(ctx, CLNODE_LOG_ERROR, "%s (%s) [%s:%d]", ctx->last_error,
                clnode_status_name(status), file, line);
    else
        cln_log(ctx, CLNODE_LOG_ERROR, "%s", ctx->last_error);
    return status;
}

void cln_clear_error(clnode_context *ctx)
{
    if (ctx) {
        ctx->last_error[0] = '\0';
        ctx->last_native = 0;
    }
}

/* ---- contexts ---- */

void clnode_context_default_options(clnode_context_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->device = NULL;
    opts->log = NULL;
    opts->log_user = NULL;
    opts->log_level = CLNODE_LOG_WARN;
    opts->num_threads = 0;
}

typedef clnode_status (*cln_backend_ctor)(clnode_context *ctx, const char *spec, cln_backend **out);

static const struct {
    const char *name;
    cln_backend_ctor create; /* NULL: not built into this library */
} cln_backends[] = {
    {"host", cln_host_backend_create},
#ifdef CLNODE_HAVE_OPENCL
    {"opencl", cln_opencl_backend_create},
#else
    {"opencl", NULL},
#endif
#ifdef CLNODE_HAVE_CUDA
    {"cuda", cln_cuda_backend_create},
#else
    {"cuda", NULL},
#endif
};

clnode_status cln_context_create_with(const clnode_context_options *opts, cln_backend_factory make,
                                      void *user, clnode_context **out)
{
    clnode_context_options defaults;
    if (!opts) {
        clnode_context_default_options(&defaults);
        opts = &defaults;
    }
    if (!out)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    clnode_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        if (opts->log)
            opts->log(opts->log_user, CLNODE_LOG_ERROR, "cannot allocate a clnode context");
        return CLNODE_ERR_OUT_OF_MEMORY;
    }
    ctx->log = opts->log;
    ctx->log_user = opts->log_user;
    ctx->log_level = opts->log_level;
    ctx->num_threads = opts->num_threads;
    clnode_status st = make(ctx, user, &ctx->backend);
    if (st != CLNODE_OK) {
        clnode_context_destroy(&ctx);
        return st;
    }
    cln_log(ctx, CLNODE_LOG_INFO, "context on %s: %s", ctx->backend->ops->name,
            ctx->backend->device_name);
    *out = ctx;
    return CLNODE_OK;
}

/* The backend named by a device string (opts->device, $CLNODE_DEVICE or "host"). */
static clnode_status cln_backend_from_spec(clnode_context *ctx, void *user, cln_backend **out)
{
    const char *spec = user;
    if (!spec || !spec[0])
        spec = getenv("CLNODE_DEVICE");
    if (!spec || !spec[0])
        spec = "host";
    const char *colon = strchr(spec, ':');
    size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const char *rest = colon ? colon + 1 : "";
    size_t i;
    for (i = 0; i < sizeof cln_backends / sizeof cln_backends[0]; ++i) {
        if (strlen(cln_backends[i].name) == name_len &&
            strncmp(cln_backends[i].name, spec, name_len) == 0)
            break;
    }
    if (i == sizeof cln_backends / sizeof cln_backends[0])
        return cln_fail(ctx, CLNODE_ERR_NO_DEVICE,
                        "unknown device \"%s\": expected host, opencl[:N|:NAME|:gpu|:cpu] or "
                        "cuda[:N]",
                        spec);
    if (!cln_backends[i].create)
        return cln_fail(ctx, CLNODE_ERR_UNSUPPORTED,
                        "device \"%s\": this build of clnode has no %s backend", spec,
                        cln_backends[i].name);
    return cln_backends[i].create(ctx, rest, out);
}

clnode_status clnode_context_create(const clnode_context_options *opts, clnode_context **out)
{
    const char *spec = opts ? opts->device : NULL;
    if (!spec || !spec[0])
        spec = getenv("CLNODE_DEVICE");
    if (!spec || !spec[0])
        spec = "host";
    return cln_context_create_with(opts, cln_backend_from_spec, (void *)spec, out);
}

void clnode_context_destroy(clnode_context **pctx)
{
    if (!pctx || !*pctx)
        return;
    clnode_context *ctx = *pctx;
    if (ctx->backend)
        ctx->backend->ops->destroy(ctx->backend);
    free(ctx);
    *pctx = NULL;
}

const char *clnode_context_last_error(const clnode_context *ctx)
{
    return ctx ? ctx->last_error : "";
}

long clnode_context_last_native_error(const clnode_context *ctx)
{
    return ctx ? ctx->last_native : 0;
}

const char *clnode_context_backend(const clnode_context *ctx)
{
    return ctx->backend->ops->name;
}

const char *clnode_context_device(const clnode_context *ctx)
{
    return ctx->backend->device_name;
}

int clnode_context_supports(const clnode_context *ctx, clnode_precision precision)
{
    return ctx->backend->ops->supports(ctx->backend, precision);
}
