/* _clnode_xla_cuda_fwd.c - clnode.jax's forward solve on XLA's CUDA buffers themselves
 * (_clnode_xla_internal.h): y0, args and the save times are read, and the states at the save
 * times or at t1 written, by the library on XLA's stream (clnode_solve_device on a context
 * adopting XLA's stream, clnode_context_create_cuda), with no copy of them through the host.
 *
 * Taken when the call's plan names a CUDA device ("cuda" or "cuda:N"), the states and times are
 * of one precision, the saved points are the save times alone or t1 alone
 * (their values are then XLA's ys result as it is laid out), y0 and args hold a row per
 * trajectory, and the save times are one list (with one start time) or a list per trajectory.
 * Every other call is staged through the host (_clnode_xla_cuda.c), as is the tangent pass (the
 * reverse pass has a path of its own on XLA's buffers, _clnode_xla_cuda_vjp.c). A forward whose
 * gradient is taken (keep = 1) keeps its tape as the CPU handler does, under the token of its
 * result (clnode_solve_device's kept solution: its kept states, y0, args and the save times read
 * back to the host for it). What still crosses to the host: t0, t1, dt0, the parameters, the factor
 * and the controller's numbers (the model and the solve's checks are made there), and the results'
 * counts and tokens, written back on the stream. The layout of the saved points (the save times'
 * values and times, +inf where a trajectory stopped before them) is the library's:
 * clnode_solve_device writes ys and the times result on the device. */
#include "_clnode_xla_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CLNODE_HAVE_CUDA
#include "clnode/cuda.h"
#endif

static const char WHAT[] = "clnode's CUDA custom call (forward, on XLA's buffers)";

/* Whether operand o has a row per trajectory (every leading axis the batch's), or one row for
 * all (no leading axis of more than 1). */
int xla_op_full(const xla_op *o, const int64_t *lead, size_t nl)
{
    if (o->nl != nl)
        return nl == 0;
    for (size_t a = 0; a < nl; a++)
        if (o->dims[a] != lead[a])
            return 0;
    return 1;
}

int xla_op_shared(const xla_op *o)
{
    for (size_t a = 0; a < o->nl; a++)
        if (o->dims[a] != 1)
            return 0;
    return 1;
}

/* The CUDA ordinal of a plan's device string ("cuda": 0, "cuda:N": N), or -1. */
int xla_cuda_ordinal(const char *device)
{
    if (strncmp(device, "cuda", 4) != 0)
        return -1;
    if (device[4] == '\0')
        return 0;
    if (device[4] != ':' || device[5] < '0' || device[5] > '9')
        return -1;
    char *end = NULL;
    const long n = strtol(device + 5, &end, 10);
    return *end == '\0' && n >= 0 && n < 1 << 20 ? (int)n : -1;
}

/* Why the call is staged through the host, or NULL when it runs on XLA's buffers. */
static const char *staged_why(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl)
{
    const clnode_solve_options *o = &pl->opts;
    if (xla_cuda_ordinal(pl->device) < 0)
        return "the plan's device is not CUDA";
    if (pl->y_f64 != pl->t_f64)
        return "the times and the states differ in precision";
    if (o->save_t0 || o->save_steps ||
        (pl->has_ts ? o->save_t1 || pl->T != pl->n_ts : !o->save_t1 || pl->T != 1))
        return "the saved points are not the save times alone or t1 alone";
    if (!xla_op_full(&ops[0], lead, nl) || (pl->k && !xla_op_full(&ops[5], lead, nl)))
        return "y0 or args are shared by trajectories";
    if (pl->has_ts && !xla_op_full(&ops[4], lead, nl) && !xla_op_shared(&ops[4]))
        return "the save times vary along some of the batch's axes only";
    if (pl->has_ts && xla_op_shared(&ops[4]) && !xla_op_shared(&ops[1]))
        return "a shared list of save times with a start time per trajectory";
    return NULL;
}

#ifndef CLNODE_HAVE_CUDA

static cxf_error *run_on_device(cxf_call_frame *f, const xla_plan *pl, const int64_t *lead,
                                size_t nl, size_t B, int keep)
{
    (void)keep;
    (void)pl;
    (void)lead;
    (void)nl;
    (void)B;
    return xla_error(f, CXF_UNAVAILABLE,
                     "%s: this build of clnode has no CUDA backend (clnode.DeviceError, in "
                     "clnode.jax.diffeqsolve)",
                     WHAT);
}

#else

/* Contexts adopting a caller's streams (XLA's, PyTorch's): one per concurrent call on a (device,
 * stream); never freed (XLA and PyTorch keep a few streams per device for the process's life). */
struct cuda_adopted {
    clnode_context *ctx;
    int device, busy;
    void *stream;
    char why[600];   /* the failed creation's message */
    char floor[512]; /* the last precision-floor warning of a solve on it */
    struct cuda_adopted *next;
};
typedef cuda_adopted adopted;
static adopted *g_adopted;

static void on_log(void *user, clnode_log_level level, clnode_log_code code, const char *message)
{
    adopted *a = user;
    if (code == CLNODE_LOG_PRECISION_FLOOR)
        snprintf(a->floor, sizeof a->floor, "%s", message);
    else if (level == CLNODE_LOG_ERROR)
        snprintf(a->why, sizeof a->why, "%s", message);
}

cuda_adopted *cuda_adopt_take(int device, void *stream, const char *what, xla_fail *e)
{
    pthread_mutex_lock(&g_lock);
    for (adopted *a = g_adopted; a; a = a->next)
        if (!a->busy && a->device == device && a->stream == stream) {
            a->busy = 1;
            a->floor[0] = 0;
            pthread_mutex_unlock(&g_lock);
            return a;
        }
    pthread_mutex_unlock(&g_lock);
    adopted *a = calloc(1, sizeof *a);
    if (!a) {
        fail(e, CLNODE_ERR_OUT_OF_MEMORY, "%s: out of memory for a context", what);
        return NULL;
    }
    a->device = device;
    a->stream = stream;
    clnode_context_options o;
    clnode_context_default_options(&o);
    o.log = on_log;
    o.log_user = a;
    const clnode_status st = clnode_context_create_cuda(&o, device, stream, &a->ctx);
    if (st != CLNODE_OK) {
        fail(e, st, "%s: clnode_context_create_cuda(device %d, the caller's stream): %s", what,
             device, a->why[0] ? a->why : clnode_status_string(st));
        free(a);
        return NULL;
    }
    a->busy = 1;
    pthread_mutex_lock(&g_lock);
    a->next = g_adopted;
    g_adopted = a;
    pthread_mutex_unlock(&g_lock);
    return a;
}

clnode_context *cuda_adopt_context(const cuda_adopted *a)
{
    return a->ctx;
}

void cuda_adopt_give(cuda_adopted *a)
{
    pthread_mutex_lock(&g_lock);
    a->busy = 0;
    pthread_mutex_unlock(&g_lock);
}

static const int32_t DIFFRAX_CODE[] = {0, 1, 2, 1, 2}; /* by clnode_result */

/* Host copies of the operands the host reads (t0, t1, dt0, scale, params, ctrl) in hf's
 * buffers, into mem (freed by the caller). */
static cxf_error *host_operands(cxf_call_frame *f, void *stream, cxf_buffer *hb, void **hp,
                                unsigned char **mem)
{
    static const int HOST[] = {1, 2, 3, 6, 7, 8};
    size_t total = 0;
    for (size_t i = 0; i < sizeof HOST / sizeof HOST[0]; i++)
        total += (xla_buffer_bytes(f->args.args[HOST[i]]) + 63) / 64 * 64;
    if (!(*mem = malloc(total ? total : 1)))
        return xla_error(f, CXF_RESOURCE_EXHAUSTED, "%s: out of host memory", WHAT);
    size_t off = 0;
    for (int64_t i = 0; i < f->args.size; i++)
        hp[i] = f->args.args[i];
    for (size_t i = 0; i < sizeof HOST / sizeof HOST[0]; i++) {
        const cxf_buffer *b = f->args.args[HOST[i]];
        const size_t n = xla_buffer_bytes(b);
        hb[i] = *b;
        hb[i].data = *mem + off;
        hp[HOST[i]] = &hb[i];
        off += (n + 63) / 64 * 64;
        const int e = xla_cuda_copy(hb[i].data, b->data, n, XLA_CUDA_D2H, stream);
        if (e)
            return xla_cuda_error(f, WHAT, e, "cudaMemcpyAsync (an operand to the host)");
    }
    const int e = xla_cuda_sync(stream);
    return e ? xla_cuda_error(f, WHAT, e, "cudaStreamSynchronize (the operands' copies)") : NULL;
}

/* The results' host parts: the counts and the tokens (the library writes the states and the
 * times on the device, clnode_device_problem.ys, .y1 and .ts). */
typedef struct host_rets {
    int32_t *counts, *token;
} host_rets;

/* The solve on XLA's buffers, then the results' host parts written on the stream. */
static cxf_error *solve_on_device(cxf_call_frame *f, const xla_plan *pl, const xla_op *ops,
                                  const int64_t *lead, size_t nl, size_t B, int keep, adopted *a,
                                  void *stream, xla_fail *e, int *failed)
{
    cxf_buffer *const *r = (cxf_buffer *const *)f->rets.rets;
    xla_batch x;
    clnode_model *model = NULL;
    clnode_solution *sol = NULL; /* keep: the tape's solution */
    clnode_trajectory_stats *stats = calloc(B, sizeof *stats);
    host_rets h = {calloc(4 * B, sizeof(int32_t)), calloc(B, sizeof(int32_t))};
    cxf_error *err = NULL;
    *failed = 1;
    memset(&x, 0, sizeof x);
    if (!stats || !h.counts || !h.token) {
        fail(e, CLNODE_ERR_OUT_OF_MEMORY, "%s: out of host memory", WHAT);
        goto done;
    }
    if (batch_setup_scalars(pl, ops, lead, nl, B, keep && pl->scale_traced, a->ctx, &x, &model, e))
        goto done;
    const int rows = pl->has_ts && !xla_op_shared(&ops[4]);
    clnode_device_problem dp;
    clnode_device_problem_default(&dp);
    dp.batch = B;
    dp.y0.handle = ops[0].b->data;
    dp.t0s = x.t0s;
    dp.t1s = x.t1s;
    dp.dt0s = x.dt0s;
    if (pl->k)
        dp.inputs.handle = ops[5].b->data;
    if (pl->has_ts) {
        dp.save_ts.handle = ops[4].b->data;
        dp.n_save_ts = pl->n_ts;
        dp.save_ts_per_trajectory = rows;
        dp.ys.handle = r[1]->data;
    } else {
        dp.y1.handle = r[1]->data;
    }
    dp.ts.handle = r[0]->data; /* the saved points' times, laid out by the library */
    x.o.keep_tape = keep;
    if (keep) {
        x.o.checkpoint_every = pl->checkpoint_every;
        dp.kept = &sol;
    }
    x.o.cancel = xla_on_cancel;
    x.o.cancel_user = NULL;
    const unsigned long long t0 = now_ns();
    const clnode_status st = clnode_solve_device(a->ctx, model, &x.o, &dp, stats, NULL);
    const unsigned long long dt = now_ns() - t0;
    pthread_mutex_lock(&g_lock);
    g_solve_ns += dt;
    g_solves++;
    g_trajectories += B;
    pthread_mutex_unlock(&g_lock);
    if (st != CLNODE_OK) {
        fail(e, st, "%s", clnode_context_last_error(a->ctx));
        goto done;
    }
    int floor = 0;
    for (size_t b = 0; b < B; b++) {
        h.counts[4 * b + 0] = (int32_t)stats[b].num_steps;
        h.counts[4 * b + 1] = (int32_t)stats[b].num_accepted;
        h.counts[4 * b + 2] = (int32_t)stats[b].num_rejected;
        h.counts[4 * b + 3] = (unsigned)stats[b].result < 5 ? DIFFRAX_CODE[stats[b].result] : 1;
        floor |= stats[b].result == CLNODE_RESULT_PRECISION_FLOOR;
    }
    if (pl->throw_ && floor) {
        fail(e, CLNODE_ERR_PRECISION, "%s",
             a->floor[0] ? a->floor
                         : "precision_floor: trajectories stopped at the rounding floor: the "
                           "rtol is below what this arithmetic resolves");
        goto done;
    }
    const int32_t token = keep ? tape_keep(&sol, &model) : 0;
    for (size_t b = 0; b < B; b++)
        h.token[b] = token;
    int ce = xla_cuda_copy(r[2]->data, h.counts, 4 * B * sizeof(int32_t), XLA_CUDA_H2D, stream);
    if (!ce)
        ce = xla_cuda_copy(r[3]->data, h.token, B * sizeof(int32_t), XLA_CUDA_H2D, stream);
    if (!ce)
        ce = xla_cuda_sync(stream); /* the host parts are freed below */
    if (ce) {
        err = xla_cuda_error(f, WHAT, ce, "cudaMemcpyAsync (a result to the device)");
        goto done;
    }
    *failed = 0;
done:
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    batch_free(&x);
    free(h.counts);
    free(h.token);
    free(stats);
    return err;
}

static cxf_error *run_on_device(cxf_call_frame *f, const xla_plan *pl, const int64_t *lead,
                                size_t nl, size_t B, int keep)
{
    cxf_stream_get_args sg;
    cxf_error *err = xla_stream(f, WHAT, &sg);
    if (err)
        return err;
    xla_fail e = {CLNODE_OK, ""};
    adopted *a = cuda_adopt_take(xla_cuda_ordinal(pl->device), sg.stream, WHAT, &e);
    if (!a)
        return error_of(f, &e);
    const char *why = xla_cuda_runtime();
    unsigned char *mem = NULL;
    void **hp = calloc((size_t)f->args.size, sizeof *hp);
    cxf_buffer hb[6];
    int failed = 0;
    if (why)
        err = xla_error(f, CXF_UNAVAILABLE,
                        "%s: %s (clnode.DeviceError, in clnode.jax.diffeqsolve)", WHAT, why);
    else if (!hp)
        err = xla_error(f, CXF_RESOURCE_EXHAUSTED, "%s: out of host memory", WHAT);
    else
        err = host_operands(f, sg.stream, hb, hp, &mem);
    if (!err) {
        cxf_call_frame hf = *f; /* the host's copies of what the host reads */
        hf.args.args = hp;
        xla_op ops[XLA_NOPS];
        sig_enter();
        if (read_operands(&hf, 0, pl, lead, nl, ops, &e))
            failed = 1;
        else
            err = solve_on_device(f, pl, ops, lead, nl, B, keep, a, sg.stream, &e, &failed);
        sig_leave();
    }
    cuda_adopt_give(a);
    free(hp);
    free(mem);
    return err ? err : failed ? error_of(f, &e) : NULL;
}

#endif

int xla_cuda_fwd_on_device(cxf_call_frame *f, cxf_error **err)
{
    *err = NULL;
    /* the frame's shapes, dtypes and plan (no data read) */
    if (!xla_cuda_executes(f, XLA_NOPS, 4, "the forward solve"))
        return 0;
    xla_fail e = {CLNODE_OK, ""};
    const xla_plan *pl = frame_plan(f, "the forward solve", &e);
    int64_t keep = 0, lead[XLA_MAX_LEAD];
    size_t nl, B;
    xla_op ops[XLA_NOPS];
    cxf_buffer *const *r = (cxf_buffer *const *)f->rets.rets;
    attr_int(f, "keep", &keep);
    if (!pl || lead_of(r[1], 2, lead, &nl, &B, &e) || read_operands(f, 0, pl, lead, nl, ops, &e) ||
        B == 0 || r[1]->dims[nl] != (int64_t)pl->T || r[1]->dims[nl + 1] != (int64_t)pl->n ||
        r[1]->dtype != (pl->y_f64 ? CXF_F64 : CXF_F32) ||
        r[0]->dtype != (pl->t_f64 ? CXF_F64 : CXF_F32) || r[2]->dtype != CXF_S32 ||
        r[3]->dtype != CXF_S32 || staged_why(pl, ops, lead, nl))
        return 0;
    const unsigned long long t0 = now_ns();
    *err = run_on_device(f, pl, lead, nl, B, keep != 0);
    pthread_mutex_lock(&g_lock);
    g_fwd_ns += now_ns() - t0;
    pthread_mutex_unlock(&g_lock);
    return 1;
}
