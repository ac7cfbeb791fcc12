/* context.c - a context is one opened backend: its options and defaults, its creation through a
 * backend factory and its destruction, what it says about its device, and the device check of a
 * precision and GEMM mode. The public constructors, which also read the device's stored probe
 * results, are backends/context_open.c. */
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"

/* ---- contexts ---- */

/* The documented defaults. A field appended to clnode_context_options gets its default here and
 * is read only from programs whose struct_size covers it (clnode/common.h). */
static void cln_context_defaults(clnode_context_options *opts)
{
    memset(opts, 0, sizeof *opts);
    opts->struct_size = sizeof *opts;
    opts->device = NULL;
    opts->log = NULL;
    opts->log_user = NULL;
    opts->log_level = CLNODE_LOG_WARN;
    opts->num_threads = 0;
}

CLN_DEFAULTS_SIZED(clnode_context_default_options_sized, clnode_context_options,
                   cln_context_defaults)

clnode_status cln_context_create_with(const clnode_context_options *opts, cln_backend_factory make,
                                      void *user, clnode_context **out)
{
    if (!out)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    /* the program's options as this library's struct: the fields it knows, defaults for the rest */
    clnode_context_options full;
    cln_context_defaults(&full);
    /* no context to hold the error yet: a logger the program's struct has is told */
    const clnode_status import_st = cln_struct_import(NULL, "clnode_context_options", opts,
                                                      CLN_CONTEXT_OPTIONS_MIN, &full, sizeof full);
    if (import_st != CLNODE_OK) {
        if (opts->struct_size >= CLN_CONTEXT_OPTIONS_MIN && opts->log)
            opts->log(opts->log_user, CLNODE_LOG_ERROR, CLNODE_LOG_GENERAL,
                      "clnode_context_options is larger than this clnode knows: the program "
                      "was built against a newer clnode");
        return import_st;
    }
    opts = &full;
    clnode_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx) {
        if (opts->log)
            opts->log(opts->log_user, CLNODE_LOG_ERROR, CLNODE_LOG_GENERAL,
                      "cannot allocate a clnode context");
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
    cln_log(ctx, CLNODE_LOG_INFO, CLNODE_LOG_GENERAL, "context on %s: %s", ctx->backend->ops->name,
            ctx->backend->device_name);
    *out = ctx;
    return CLNODE_OK;
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

const char *clnode_context_backend(const clnode_context *ctx)
{
    return ctx->backend->ops->name;
}

long clnode_context_launches(const clnode_context *ctx, long *gemms)
{
    if (gemms)
        *gemms = ctx ? ctx->backend->gemms : 0;
    return ctx ? ctx->backend->launches : 0;
}

const char *clnode_context_device(const clnode_context *ctx)
{
    return ctx->backend->device_name;
}

int clnode_context_supports(const clnode_context *ctx, clnode_precision precision)
{
    return ctx->backend->ops->supports(ctx->backend, precision);
}

/* ---- the device check ---- */

clnode_status cln_check_device_precision(clnode_context *ctx, clnode_precision prec,
                                         clnode_gemm_mode mode, const char *what)
{
    const clnode_status st = cln_check_gemm_mode(ctx, prec, mode);
    if (st != CLNODE_OK)
        return st;
    cln_backend *be = ctx->backend;
    CLN_CHECK(ctx, be->ops->supports(be, prec),
              prec == CLNODE_FP64 ? CLNODE_ERR_NO_FP64 : CLNODE_ERR_UNSUPPORTED,
              "device %s cannot %s in %s", be->device_name, what, clnode_precision_name(prec));
    return CLNODE_OK;
}
