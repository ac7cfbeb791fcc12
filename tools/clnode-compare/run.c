/* run.c - clnode-compare's solves: the host float64 strict reference and its sensitivity
 * baseline, then every device's rows, the library's messages collected per row (compare.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode/probe.h"
#include "compare.h"

int compare_default_devices(compare *c)
{
    clnode_device_list *l = NULL;
    if (clnode_device_list_create(tool_log, (void *)COMPARE_PROG, &l) != CLNODE_OK) {
        tool_error("cannot list the devices");
        return TOOL_EXIT_RESOURCE;
    }
    for (size_t i = 0; i < clnode_device_list_count(l) && c->ndev < MAX_DEVICES; ++i)
        c->devices[c->ndev++] = strdup(clnode_device_list_get(l, i)->spec);
    for (size_t i = 0; i < clnode_device_list_num_backends(l); ++i) {
        const clnode_backend_info *b = clnode_device_list_backend(l, i);
        if (b->note[0] && !c->json)
            printf("%s: %s\n", b->name, b->note);
    }
    clnode_device_list_destroy(&l);
    for (size_t i = 0; i < c->ndev; ++i)
        if (!c->devices[i]) {
            tool_error("out of memory");
            return TOOL_EXIT_RESOURCE;
        }
    return 0;
}

/* Do two messages differ at most in their numbers ("1 of 1 trajectories", "2 of 2 ...")? */
static int same_but_numbers(const char *a, const char *b)
{
    for (;;) {
        const int da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da && db) {
            while ((*a >= '0' && *a <= '9') || *a == '.')
                ++a;
            while ((*b >= '0' && *b <= '9') || *b == '.')
                ++b;
            continue;
        }
        if (*a != *b)
            return 0;
        if (!*a)
            return 1;
        ++a;
        ++b;
    }
}

/* The library's logger: messages of a running row are collected (and printed once each, with
 * their count, when the row is done); others are printed at once. */
static void collect_log(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    compare *c = user;
    if (code == CLNODE_LOG_BUILD) /* a kernel build: as it happens, not in a row's notes */
        tool_log(NULL, level, code, msg);
    if (level != CLNODE_LOG_ERROR && level != CLNODE_LOG_WARN)
        return;
    if (c->cur_row < 0) {
        tool_log(NULL, level, code, msg);
        return;
    }
    row *r = &c->rows[c->cur_row];
    for (size_t i = 0; i < r->nlog; ++i)
        if (r->log[i].level == level && same_but_numbers(r->log[i].text, msg)) {
            ++r->log[i].count;
            return;
        }
    if (r->nlog == MAX_WARN) {
        ++r->log_dropped;
        return;
    }
    logged *l = &r->log[r->nlog++];
    l->level = level;
    snprintf(l->text, sizeof l->text, "%s", msg);
    l->count = 1;
}

/* One line per row: its first message in full, the others by their first clause. */
static void print_row_log(const row *r)
{
    if (!r->nlog)
        return;
    int error = 0;
    for (size_t i = 0; i < r->nlog; ++i)
        error |= r->log[i].level == CLNODE_LOG_ERROR;
    fprintf(stderr, "%s: %s%s %s %s: %s (%ld time%s)", COMPARE_PROG,
            error ? "" : "warning: ", r->spec, clnode_precision_name(r->prec),
            clnode_gemm_mode_name(r->mode), r->log[0].text, r->log[0].count,
            r->log[0].count == 1 ? "" : "s");
    for (size_t i = 1; i < r->nlog; ++i) {
        const char *t = r->log[i].text;
        size_t n = strcspn(t, ":");
        fprintf(stderr, "; %.*s%s (%ld time%s)", n < 60 ? (int)n : 60, t, n < 60 ? "" : "...",
                r->log[i].count, r->log[i].count == 1 ? "" : "s");
    }
    if (r->log_dropped)
        fprintf(stderr, "; %ld more", r->log_dropped);
    fputc('\n', stderr);
}

static void add_skipped(compare *c, const char *fmt, const char *spec, const char *what,
                        const char *why)
{
    const size_t used = strlen(c->skipped);
    if (used < sizeof c->skipped - 1)
        snprintf(c->skipped + used, sizeof c->skipped - used, fmt, spec, what, why);
}

/* Opens a context on `spec` with the problem's model and base states (R x N). */
static int open_problem(compare *c, const char *spec, clnode_context **ctx, clnode_model **model)
{
    c->pb.device = spec;
    c->pb.backend = NULL;
    c->pb.log = collect_log;
    c->pb.log_user = c;
    double *y0 = NULL;
    size_t batch = 0;
    const long saved_batch = c->pb.batch;
    c->pb.batch = 0;
    int rc = tool_problem_open(&c->pb, ctx, model, &y0, &batch);
    c->pb.batch = saved_batch;
    if (rc)
        return rc;
    if (!c->y0base) {
        c->y0base = y0;
        c->R = batch;
        c->N = clnode_model_dim(*model);
    } else {
        free(y0);
    }
    return 0;
}

/* Solves `copies` copies of the base states, saving the steps, t1 and the times ts. */
static clnode_status solve_batch(compare *c, clnode_context *ctx, const clnode_model *model,
                                 clnode_precision prec, clnode_gemm_mode mode, size_t copies,
                                 const double *ts, size_t n_ts, clnode_solution **out)
{
    clnode_solve_options o = c->pb.opts;
    o.precision = prec;
    o.gemm_precision = mode;
    o.save_t0 = 0;
    o.save_t1 = 1;
    o.save_steps = 1;
    o.progress = NULL;
    clnode_problem p = c->pb.prob;
    p.save_ts = ts;
    p.n_save_ts = n_ts;
    size_t B, elems;
    double *y0 = NULL;
    if (!tool_mul_size(copies, c->R, &B) || !tool_mul_size(B, c->N, &elems) ||
        !tool_mul_size(elems, sizeof(double), &elems) || !(y0 = malloc(elems)))
        return CLNODE_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < copies; ++k)
        memcpy(y0 + k * c->R * c->N, c->y0base, c->R * c->N * sizeof(double));
    p.batch = B;
    p.y0 = y0;
    clnode_status st = clnode_solve(ctx, model, &o, &p, out);
    free(y0);
    return st;
}

static row *new_row(compare *c)
{
    if (c->nrows == c->caprows) {
        const size_t cap = c->caprows ? 2 * c->caprows : 16;
        row *r = realloc(c->rows, cap * sizeof *r);
        if (!r)
            return NULL;
        c->rows = r;
        c->caprows = cap;
    }
    row *r = &c->rows[c->nrows++];
    memset(r, 0, sizeof *r);
    return r;
}

static void progress_msg(const compare *c, const char *spec, clnode_precision p, clnode_gemm_mode m,
                         const char *what)
{
    if (!c->progress)
        return;
    fprintf(stderr, "\r\033[K%s: %s %s %s: %s (a first OpenCL build takes ~30 s)", COMPARE_PROG,
            spec, clnode_precision_name(p), clnode_gemm_mode_name(m), what);
    fflush(stderr);
}

int compare_run_device(compare *c, const char *spec)
{
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    const int orc = open_problem(c, spec, &ctx, &model);
    if (orc) {
        tool_error("cannot open device %s", spec);
        return orc;
    }
    for (int pi = 0; pi < 2; ++pi) {
        const clnode_precision prec = pi ? CLNODE_FP64 : CLNODE_FP32;
        if (!c->want_prec[pi])
            continue;
        if (!clnode_context_supports(ctx, prec)) {
            add_skipped(c, "  %s %s: %s\n", spec, clnode_precision_name(prec),
                        "the device has no fp64");
            continue;
        }
        for (int mi = 0; mi < 2; ++mi) {
            const clnode_gemm_mode mode = mi ? CLNODE_GEMM_TF32 : CLNODE_GEMM_STRICT;
            if (!c->want_mode[mi] || (mode == CLNODE_GEMM_TF32 && prec == CLNODE_FP64))
                continue;
            row *r = new_row(c);
            if (!r) {
                tool_error("out of memory");
                clnode_model_destroy(&model);
                clnode_context_destroy(&ctx);
                return TOOL_EXIT_RESOURCE;
            }
            c->cur_row = (long)(r - c->rows);
            snprintf(r->spec, sizeof r->spec, "%s", spec);
            snprintf(r->device_name, sizeof r->device_name, "%s", clnode_context_device(ctx));
            r->prec = prec;
            r->mode = mode;
            progress_msg(c, spec, prec, mode, "probing the GEMM");
            r->probe_status = clnode_probe_gemm(ctx, prec, mode, &r->probe);
            if (r->probe_status == CLNODE_ERR_UNSUPPORTED) {
                add_skipped(c, "  %s tf32: %s (%s)\n", spec, "not available",
                            clnode_context_last_error(ctx));
                --c->nrows;
                c->cur_row = -1;
                continue;
            }
            for (size_t b = 0; b < c->nb; ++b) {
                char what[64];
                snprintf(what, sizeof what, "solving batch %zu", c->batches[b] * c->R);
                progress_msg(c, spec, prec, mode, what);
                r->status[b] = solve_batch(c, ctx, model, prec, mode, c->batches[b], c->ts, c->n_ts,
                                           &r->sol[b]);
                if (r->status[b] != CLNODE_OK)
                    snprintf(r->error[b], sizeof r->error[b], "%s: %.200s",
                             clnode_status_name(r->status[b]), clnode_context_last_error(ctx));
            }
            if (r->status[0] == CLNODE_ERR_UNSUPPORTED && mode == CLNODE_GEMM_TF32) {
                add_skipped(c, "  %s tf32: %s (%s)\n", spec, "not available", r->error[0]);
                for (size_t b = 0; b < c->nb; ++b)
                    clnode_solution_destroy(&r->sol[b]);
                --c->nrows;
                c->cur_row = -1;
                continue;
            }
            if (c->plot && r->status[0] == CLNODE_OK) {
                progress_msg(c, spec, prec, mode, "solving for the plot");
                if (solve_batch(c, ctx, model, prec, mode, 1, c->dense_ts, N_PLOT_TS,
                                &r->plot_sol) != CLNODE_OK)
                    clnode_solution_destroy(&r->plot_sol);
            }
            c->cur_row = -1;
            if (c->progress && r->nlog)
                fprintf(stderr, "\r\033[K");
            print_row_log(r);
        }
    }
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return 0;
}

static double *even_times(double t0, double t1, size_t n)
{
    double *v = malloc(n * sizeof(double));
    for (size_t k = 0; v && k < n; ++k)
        v[k] = k + 1 == n ? t1 : t0 + (t1 - t0) * (double)k / (double)(n - 1);
    return v;
}

/* The host fp64 strict reference. Returns 0, or the exit status: 4 when a reference trajectory
 * does not succeed (nothing can be certified against it). */
int compare_reference(compare *c)
{
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    int rc = open_problem(c, "host", &ctx, &model);
    if (rc)
        return rc;
    snprintf(c->ref_device, sizeof c->ref_device, "%s", clnode_context_device(ctx));
    snprintf(c->model_desc, sizeof c->model_desc, "%s (%zu layers, dim %zu, %s)",
             c->pb.model_path ? c->pb.model_path : "seed model", clnode_model_num_layers(model),
             c->N, clnode_activation_name(clnode_model_activation(model)));
    if (!c->ts) {
        c->n_ts = N_DEFAULT_TS;
        if (!(c->ts = even_times(c->pb.opts.t0, c->pb.opts.t1, c->n_ts)))
            goto oom;
    }
    if (c->plot && !(c->dense_ts = even_times(c->pb.opts.t0, c->pb.opts.t1, N_PLOT_TS)))
        goto oom;
    progress_msg(c, "host", CLNODE_FP64, CLNODE_GEMM_STRICT, "reference");
    clnode_status st =
        solve_batch(c, ctx, model, CLNODE_FP64, CLNODE_GEMM_STRICT, 1, c->ts, c->n_ts, &c->ref);
    if (st == CLNODE_OK && c->plot)
        st = solve_batch(c, ctx, model, CLNODE_FP64, CLNODE_GEMM_STRICT, 1, c->dense_ts, N_PLOT_TS,
                         &c->ref_dense);
    if (st != CLNODE_OK) {
        tool_error("the host fp64 reference failed: %s", clnode_context_last_error(ctx));
        rc = tool_exit_status(st);
    } else {
        for (size_t i = 0; i < c->R; ++i) {
            clnode_trajectory_stats s;
            clnode_solution_stats(c->ref, i, &s);
            if (s.result != CLNODE_RESULT_SUCCESS) {
                tool_error("the host fp64 reference of trajectory %zu ended with %s: nothing "
                           "can be compared with it",
                           i, clnode_result_name(s.result));
                rc = TOOL_EXIT_VERIFY;
            }
        }
    }
    for (int pi = 0; st == CLNODE_OK && !rc && c->sensitivity && pi < 2; ++pi) {
        if (!c->want_prec[pi])
            continue;
        clnode_solve_options o = c->pb.opts;
        o.precision = pi ? CLNODE_FP64 : CLNODE_FP32;
        clnode_problem p = c->pb.prob;
        p.batch = c->R;
        p.y0 = c->y0base;
        p.save_ts = c->ts;
        p.n_save_ts = c->n_ts;
        clnode_sensitivity_options so = c->sopts;
        so.fp64_spread = !pi; /* fp32's baseline also says whether fp64 is well-conditioned */
        progress_msg(c, "host", o.precision, CLNODE_GEMM_STRICT, "sensitivity baseline");
        st = clnode_sensitivity_baseline(ctx, model, &o, &p, &so, &c->base[pi]);
        if (st != CLNODE_OK) {
            tool_error("the sensitivity baseline failed: %s", clnode_context_last_error(ctx));
            rc = tool_exit_status(st);
        }
    }
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return rc;
oom:
    tool_error("out of memory");
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    return TOOL_EXIT_RESOURCE;
}
