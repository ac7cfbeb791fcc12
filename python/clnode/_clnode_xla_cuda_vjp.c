/* _clnode_xla_cuda_vjp.c - clnode.jax's reverse pass on XLA's CUDA buffers themselves
 * (_clnode_xla_internal.h): the cotangent of ys is read, and the gradients of y0, args, the
 * parameters and the factor written, by the library on XLA's stream
 * (clnode_gradient_compute_device on a context adopting XLA's stream, clnode_context_create_cuda),
 * with no copy of them through the host.
 *
 * Taken when the call's plan names a CUDA device ("cuda" or "cuda:N"), the solve's precision is
 * the states' (the cotangent's dtype), the call is one group (no batch-wide gradient kept per
 * index: attribute keep 0, parameters and factor one for the batch), the cotangent, the token and
 * the wanted gradients of y0 and args hold a row per trajectory, the parameters' and the factor's
 * gradients are one row of the solve's dtype, and the forward's tape is in the registry (its token
 * read from XLA's buffer: the one value that crosses to the host besides the tape's own traffic,
 * clnode/device_gradient.h). Every other call, a miss included (the staged handler re-solves),
 * is staged through the host (_clnode_xla_cuda.c) as before. */
#include "_clnode_xla_internal.h"

#include <stdlib.h>
#include <string.h>

static const char WHAT[] = "clnode's CUDA custom call (reverse, on XLA's buffers)";

/* One wanted gradient: its operand's index (0 y0, 5 args, 6 scale, 7 params) and its result. */
typedef struct vjp_out {
    int which;
    cxf_buffer *b;
} vjp_out;

/* A reverse call the device path takes: its plan, batch, cotangent, token and results. */
typedef struct vjp_dev {
    const xla_plan *pl;
    size_t B, nl;
    int64_t lead[XLA_MAX_LEAD];
    xla_op ct, tok;
    vjp_out outs[4];
    int nouts;
} vjp_dev;

/* Whether the results wanted (attribute want) are buffers the device path writes whole: y0's and
 * args' a row per trajectory, the factor's and the parameters' one row, each of the solve's
 * dtype. */
static int outs_fit(const cxf_call_frame *f, const xla_op *ops, int64_t want, vjp_dev *v)
{
    const int dt = v->pl->y_f64 ? CXF_F64 : CXF_F32;
    xla_fail e = {CLNODE_OK, ""};
    v->nouts = 0;
    for (int i = 0; i < 8; i++) {
        if (!(want & (1 << i)))
            continue;
        if (v->nouts == 4 || v->nouts >= f->rets.size || (i != 0 && i != 5 && i != 6 && i != 7))
            return 0;
        cxf_buffer *b = f->rets.rets[v->nouts];
        const int64_t core = (int64_t)ops[i].core;
        xla_op shape;
        if (op_read(&shape, b, NAMES[i], 1, &core, v->lead, v->nl, dt, &e) ||
            (i == 0 || i == 5 ? !xla_op_full(&shape, v->lead, v->nl) : !xla_op_shared(&shape)) ||
            ((i == 6 || i == 7) && !xla_op_shared(&ops[i])))
            return 0;
        v->outs[v->nouts].which = i;
        v->outs[v->nouts++].b = b;
    }
    return v->nouts == f->rets.size;
}

#ifndef CLNODE_HAVE_CUDA

static cxf_error *run_on_device(cxf_call_frame *f, const vjp_dev *v, int *staged)
{
    (void)v;
    *staged = 0;
    return xla_error(f, CXF_UNAVAILABLE,
                     "%s: this build of clnode has no CUDA backend (clnode.DeviceError, in "
                     "clnode.jax.diffeqsolve)",
                     WHAT);
}

#else

/* The forward's tape of the call (its token read from XLA's buffer), or NULL: a miss (counted by
 * the staged handler, which re-solves) or a failed copy (*err). */
static xla_tape *device_tape(const cxf_call_frame *f, const vjp_dev *v, void *stream,
                             cxf_error **err)
{
    int32_t *tk = malloc(v->B * sizeof *tk);
    if (!tk) {
        *err = xla_error(f, CXF_RESOURCE_EXHAUSTED, "%s: out of host memory", WHAT);
        return NULL;
    }
    int ce = xla_cuda_copy(tk, v->tok.b->data, v->B * sizeof *tk, XLA_CUDA_D2H, stream);
    if (!ce)
        ce = xla_cuda_sync(stream);
    if (ce)
        *err = xla_cuda_error(f, WHAT, ce, "cudaMemcpyAsync (the token to the host)");
    int same = !ce;
    for (size_t b = 1; same && b < v->B; b++)
        same = tk[b] == tk[0];
    xla_tape *t = same && tk[0] < 0 ? tape_take(tk[0], 0) : NULL;
    free(tk);
    if (t) {
        pthread_mutex_lock(&g_lock);
        g_hits++;
        pthread_mutex_unlock(&g_lock);
    }
    return t;
}

/* The reverse pass of the tape on XLA's buffers, on the adopted context ctx. */
static int reverse_on_device(const vjp_dev *v, xla_tape *t, clnode_context *ctx, xla_fail *e)
{
    size_t ns = 0;
    clnode_model_out_scale(t->model, &ns);
    clnode_device_gradient dg;
    clnode_device_gradient_default(&dg);
    dg.slots = v->pl->T;
    dg.cot.handle = v->ct.b->data;
    for (int i = 0; i < v->nouts; i++) {
        const int w = v->outs[i].which;
        if (w == 6 && ns != v->pl->n)
            return fail(e, CLNODE_ERR_INTERNAL,
                        "%s: the forward's model has %zu output scale values, not %zu", WHAT, ns,
                        v->pl->n);
        clnode_device_array *to = w == 0   ? &dg.y0
                                  : w == 5 ? &dg.inputs
                                  : w == 6 ? &dg.scale
                                           : &dg.params;
        to->handle = v->outs[i].b->data;
    }
    clnode_gradient_options go;
    clnode_gradient_default_options(&go);
    go.cancel = xla_on_cancel;
    const unsigned long long t0 = now_ns();
    const clnode_status st = clnode_gradient_compute_device(ctx, t->model, &go, t->sol, &dg);
    const unsigned long long dt = now_ns() - t0;
    pthread_mutex_lock(&g_lock);
    g_reverse_ns += dt;
    g_reverses++;
    pthread_mutex_unlock(&g_lock);
    return st == CLNODE_OK ? 0 : fail(e, st, "%s", clnode_context_last_error(ctx));
}

static cxf_error *run_on_device(cxf_call_frame *f, const vjp_dev *v, int *staged)
{
    *staged = 0;
    cxf_stream_get_args sg;
    cxf_error *err = xla_stream(f, WHAT, &sg);
    if (err)
        return err;
    xla_fail e = {CLNODE_OK, ""};
    cuda_adopted *a = cuda_adopt_take(xla_cuda_ordinal(v->pl->device), sg.stream, WHAT, &e);
    if (!a)
        return error_of(f, &e);
    const char *why = xla_cuda_runtime();
    xla_tape *t = NULL;
    int failed = 0;
    if (why)
        err = xla_error(f, CXF_UNAVAILABLE,
                        "%s: %s (clnode.DeviceError, in clnode.jax.diffeqsolve)", WHAT, why);
    else
        t = device_tape(f, v, sg.stream, &err);
    if (!err && !t)
        *staged = 1; /* a miss: the staged handler re-solves */
    if (t) {
        sig_enter();
        failed = reverse_on_device(v, t, cuda_adopt_context(a), &e);
        sig_leave();
        tape_free(t);
    }
    cuda_adopt_give(a);
    return err ? err : failed ? error_of(f, &e) : NULL;
}

#endif

int xla_cuda_vjp_on_device(cxf_call_frame *f, cxf_error **err)
{
    *err = NULL;
    /* the frame's shapes, dtypes and plan (no data read) */
    if (!xla_cuda_executes(f, 2 + XLA_NOPS, -1, "the reverse pass"))
        return 0;
    xla_fail e = {CLNODE_OK, ""};
    vjp_dev v;
    memset(&v, 0, sizeof v);
    v.pl = frame_plan(f, "the reverse pass", &e);
    int64_t want = 0, keep = 0;
    attr_int(f, "want", &want);
    attr_int(f, "keep", &keep);
    const cxf_buffer *ctb = f->args.args[0];
    xla_op ops[XLA_NOPS];
    if (!v.pl || keep != 0 || xla_cuda_ordinal(v.pl->device) < 0 ||
        (v.pl->opts.precision == CLNODE_FP64) != (v.pl->y_f64 != 0) ||
        !CXF_COVERS(ctb, cxf_buffer, dims) || lead_of(ctb, 2, v.lead, &v.nl, &v.B, &e) || v.B == 0)
        return 0;
    const int64_t ct_core[2] = {(int64_t)v.pl->T, (int64_t)v.pl->n};
    if (op_read(&v.ct, ctb, "the cotangent of ys", 2, ct_core, v.lead, v.nl,
                v.pl->y_f64 ? CXF_F64 : CXF_F32, &e) ||
        op_read(&v.tok, f->args.args[1], "token", 0, NULL, v.lead, v.nl, CXF_S32, &e) ||
        read_operands(f, 2, v.pl, v.lead, v.nl, ops, &e) || !xla_op_full(&v.ct, v.lead, v.nl) ||
        !xla_op_full(&v.tok, v.lead, v.nl) || !outs_fit(f, ops, want, &v))
        return 0;
    const unsigned long long t0 = now_ns();
    int staged = 0;
    *err = run_on_device(f, &v, &staged);
    if (staged)
        return 0;
    pthread_mutex_lock(&g_lock);
    g_vjp_ns += now_ns() - t0;
    g_vjps++;
    pthread_mutex_unlock(&g_lock);
    return 1;
}
