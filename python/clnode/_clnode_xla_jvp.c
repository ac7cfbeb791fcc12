/* _clnode_xla_jvp.c - clnode.jax's XLA custom calls: the tangent handler (forward mode,
 * _clnode_xla_internal.h).
 *
 * Operands: the wanted operands' tangents (attribute want: bits of y0 1, args 32, scale 64,
 * params 128, in the operands' order), each with the direction axes first (attribute dirs: how
 * many; jax.jacfwd's batch of directions), then none or the batch's leading axes (size 1 where
 * the tangent is one for the batch), then the operand's own axes; the token (lead); the
 * forward's 9 operands. One result: the tangent of ys, (dirs, lead, T, N). Attribute keep: bit a
 * for leading axis a along which each index is its own tangent pass (a batch-wide operand or its
 * tangent batched there). The directions of a pass go to the library's tangent pass in one call
 * (clnode_tangent_compute: ndir = the product of the direction axes), with the forward's tape
 * when one pass covers the batch (else re-solved, the same steps and bits). */
#include "_clnode_xla_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode/tangent.h"

/* A wanted operand's tangent: the operand (its index), its rows per direction read as an operand
 * of the batch, and the elements of one direction */
typedef struct xla_tan {
    int which;
    cxf_buffer sub; /* the buffer without its direction axes (direction 0's data) */
    xla_op op;
    size_t stride;
} xla_tan;

static double tan_at(const xla_tan *t, size_t d, size_t row, size_t j)
{
    const size_t i = d * t->stride + row * t->op.core + j;
    return t->sub.dtype == CXF_F32 ? (double)((const float *)t->sub.data)[i]
                                   : ((const double *)t->sub.data)[i];
}

/* The directions of trajectories sel[0..m) as the tangent pass takes them: per trajectory
 * (ndir x m x core; NULL for none: zero) or, for the batch-wide ones, one row per direction
 * (ndir x np: the layers' parameters, then the output scale's ns values). */
static double *per_traj_dirs(const xla_tan *t, size_t ndir, const int64_t *lead, size_t nl,
                             const size_t *sel, size_t m)
{
    const size_t c = t->op.core;
    const size_t n = ndir * m * c;
    double *out = malloc((n > 0 ? n : 1) * sizeof *out);
    for (size_t d = 0; out && d < ndir; d++)
        for (size_t i = 0; i < m; i++) {
            const size_t r = op_row(&t->op, lead, nl, sel[i]);
            for (size_t j = 0; j < c; j++)
                out[(d * m + i) * c + j] = tan_at(t, d, r, j);
        }
    return out;
}

static double *theta_dirs(const xla_tan *params, const xla_tan *scale, size_t n_params, size_t ns,
                          size_t ndir, const int64_t *lead, size_t nl, size_t first)
{
    const size_t np = n_params + ns;
    const size_t n = ndir * np;
    double *out = calloc(n > 0 ? n : 1, sizeof *out);
    for (size_t d = 0; out && d < ndir; d++) {
        if (params) {
            const size_t r = op_row(&params->op, lead, nl, first);
            for (size_t j = 0; j < n_params; j++)
                out[d * np + j] = tan_at(params, d, r, j);
        }
        if (scale && ns) { /* the factor's tangent: one value per component (ns = N) */
            const size_t r = op_row(&scale->op, lead, nl, first);
            for (size_t j = 0; j < ns; j++)
                out[d * np + n_params + j] = tan_at(scale, d, r, ns == 1 ? 0 : j);
        }
    }
    return out;
}

typedef struct jvp_call {
    const xla_plan *pl;
    const xla_op *ops;
    const int64_t *lead;
    size_t nl, B, ndir;
    const xla_tan *tan[XLA_NOPS]; /* by operand index; NULL where not wanted */
    cxf_buffer *out;
} jvp_call;

/* The library's tangent pass on xc's context; its message in e->msg on failure. */
static clnode_status tangent_pass(xla_ctx *xc, const clnode_model *model,
                                  const clnode_solution *sol, const jvp_call *c, const double *dy0,
                                  const double *din, const double *dth, clnode_tangent **t,
                                  xla_fail *e)
{
    clnode_tangent_options to;
    clnode_tangent_default_options(&to);
    to.cancel = xla_on_cancel;
    const unsigned long long t0 = now_ns();
    const clnode_status st =
        clnode_tangent_compute(xc->ctx, model, &to, sol, c->pl->T, c->ndir, dy0, din, dth, t);
    const unsigned long long dt = now_ns() - t0;
    pthread_mutex_lock(&g_lock);
    g_tangent_ns += dt;
    g_tangents++;
    g_tangent_dirs += c->ndir;
    g_tangent_trajectories += clnode_solution_batch(sol);
    pthread_mutex_unlock(&g_lock);
    if (st != CLNODE_OK)
        snprintf(e->msg, sizeof e->msg, "%s", clnode_context_last_error(xc->ctx));
    return st;
}

/* One tangent pass of trajectories sel[0..m) (with the forward's tape when given), written into
 * the result (user: the call's jvp_call; an xla_group_fn). */
static int tangent_one(void *user, const size_t *sel, size_t m, const int *kept_axis,
                       xla_tape *tape, xla_ctx *xc, xla_fail *e)
{
    const jvp_call *c = user;
    const xla_plan *pl = c->pl;
    xla_batch x;
    memset(&x, 0, sizeof x);
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    clnode_tangent *t = NULL;
    double *dy0 = NULL, *din = NULL, *dth = NULL;
    /* re-solved as the forward that keeps its tape solves (the factor one value per component
     * where it is traced) */
    int rc = batch_kept(pl, c->ops, c->lead, c->nl, sel, m, kept_axis, pl->scale_traced, tape, xc,
                        &x, &model, &sol, e);
    size_t ns = 0;
    if (!rc)
        clnode_model_out_scale(model, &ns);
    if (!rc && c->tan[6] && ns != pl->n)
        rc = fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                  "clnode: the tangent pass: the factor's tangent needs the model's output scale "
                  "per component (%zu values, not %zu)",
                  pl->n, ns);
    const int theta = c->tan[6] || c->tan[7];
    if (!rc && ((c->tan[0] && !(dy0 = per_traj_dirs(c->tan[0], c->ndir, c->lead, c->nl, sel, m))) ||
                (c->tan[5] && pl->k &&
                 !(din = per_traj_dirs(c->tan[5], c->ndir, c->lead, c->nl, sel, m))) ||
                (theta && !(dth = theta_dirs(c->tan[7], c->tan[6], pl->n_params, ns, c->ndir,
                                             c->lead, c->nl, sel[0])))))
        rc = fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the tangents' directions");
    if (!rc) {
        clnode_status st = tangent_pass(xc, model, sol, c, dy0, din, dth, &t, e);
        if (st == CLNODE_ERR_UNSUPPORTED && strcmp(xc->device, "host") != 0) {
            /* a device without the tangent pass: the host's (it recomputes the steps from the
             * tape on its ordered GEMM: the same bits) */
            xla_ctx *hc = ctx_take("host", e->msg, sizeof e->msg, &st);
            if (hc) {
                st = tangent_pass(hc, model, sol, c, dy0, din, dth, &t, e);
                ctx_give(hc);
            }
        }
        if (st != CLNODE_OK) { /* e->msg holds the message */
            e->st = st;
            rc = -1;
        }
    }
    if (!rc) {
        const double *v = clnode_tangent_values(t);
        const size_t row = pl->T * pl->n;
        for (size_t d = 0; d < c->ndir; d++)
            for (size_t i = 0; i < m; i++) {
                const double *src = v + (d * m + i) * row;
                const size_t at = (d * c->B + sel[i]) * row;
                if (c->out->dtype == CXF_F32)
                    for (size_t j = 0; j < row; j++)
                        ((float *)c->out->data)[at + j] = (float)src[j];
                else
                    memcpy((double *)c->out->data + at, src, row * sizeof *src);
            }
    }
    clnode_tangent_destroy(&t);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    batch_free(&x);
    free(dy0);
    free(din);
    free(dth);
    return rc;
}

/* Reads tangent i (of operand `which`) with ndax direction axes of ndir directions. */
static int tan_read(xla_tan *t, const cxf_buffer *b, int which, const xla_op *op, size_t ndax,
                    size_t ndir, const int64_t *lead, size_t nl, xla_fail *e)
{
    if (!CXF_COVERS(b, cxf_buffer, dims) || b->rank < (int64_t)ndax)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT, "clnode: the tangent of %s has rank %lld",
                    NAMES[which], (long long)b->rank);
    size_t dirs = 1;
    for (size_t a = 0; a < ndax; a++)
        dirs *= (size_t)b->dims[a];
    if (dirs != ndir)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the tangent of %s has %zu directions, the result %zu", NAMES[which],
                    dirs, ndir);
    t->which = which;
    t->sub = *b;
    t->sub.rank = b->rank - (int64_t)ndax;
    t->sub.dims = b->dims + ndax;
    const int64_t core = (int64_t)op->core;
    if (op_read(&t->op, &t->sub, NAMES[which], 1, &core, lead, nl, op->b->dtype, e))
        return -1;
    size_t rows = 1;
    for (size_t a = 0; a < t->op.nl; a++)
        rows *= (size_t)t->op.dims[a];
    t->stride = rows * t->op.core;
    return 0;
}

int jvp_run(cxf_call_frame *f, xla_fail *e)
{
    if (!CXF_COVERS(f, cxf_call_frame, attrs) || !CXF_COVERS(&f->attrs, cxf_attrs, attrs))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the tangent pass: XLA's call frame is smaller than API 0.1's");
    int64_t want = 0, keep = 0, ndax = 0, lead[XLA_MAX_LEAD];
    attr_int(f, "want", &want);
    attr_int(f, "keep", &keep);
    attr_int(f, "dirs", &ndax);
    int nw = 0;
    for (int i = 0; i < 8; i++)
        if (want & (1 << i)) {
            if (i != 0 && i != 5 && i != 6 && i != 7)
                return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                            "clnode: the tangent pass: attribute want %lld", (long long)want);
            nw++;
        }
    if (read_frame(f, nw + 1 + XLA_NOPS, 1, "the tangent pass", e))
        return -1;
    const xla_plan *pl = frame_plan(f, "the tangent pass", e);
    if (!pl)
        return -1;
    cxf_buffer *out = f->rets.rets[0];
    if (ndax < 0 || out->rank < ndax + 2 || out->rank - ndax - 2 > XLA_MAX_LEAD ||
        out->dims[out->rank - 2] != (int64_t)pl->T || out->dims[out->rank - 1] != (int64_t)pl->n ||
        out->dtype != (pl->y_f64 ? CXF_F64 : CXF_F32))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the tangent pass's result has another shape or dtype than its "
                    "plan's (%zu slots of %zu)",
                    pl->T, pl->n);
    size_t ndir = 1, nl = (size_t)(out->rank - ndax - 2), B = 1;
    for (int64_t a = 0; a < ndax; a++)
        ndir *= (size_t)out->dims[a];
    for (size_t a = 0; a < nl; a++) {
        lead[a] = out->dims[ndax + (int64_t)a];
        B *= (size_t)lead[a];
    }
    xla_op tok, ops[XLA_NOPS];
    if (op_read(&tok, f->args.args[nw], "token", 0, NULL, lead, nl, CXF_S32, e) ||
        read_operands(f, nw + 1, pl, lead, nl, ops, e))
        return -1;
    xla_tan tans[4];
    jvp_call c = {pl, ops, lead, nl, B, ndir, {NULL}, out};
    for (int i = 0, w = 0; i < 8; i++)
        if (want & (1 << i)) {
            if (tan_read(&tans[w], f->args.args[w], i, &ops[i], (size_t)ndax, ndir, lead, nl, e))
                return -1;
            c.tan[i] = &tans[w++];
        }
    size_t elems = ndir * B * pl->T * pl->n;
    memset(out->data, 0, elems * (out->dtype == CXF_F32 ? 4 : 8));
    /* the axes along which each index is its own pass: kept ones, and those along which a
     * batch-wide operand or its tangent is batched */
    int kept[XLA_MAX_LEAD] = {0};
    for (size_t a = 0; a < nl; a++) {
        kept[a] = (keep >> a) & 1;
        for (int i = 6; i < 8; i++)
            kept[a] |= (ops[i].nl && ops[i].dims[a] > 1) ||
                       (c.tan[i] && c.tan[i]->op.nl && c.tan[i]->op.dims[a] > 1);
    }
    if (ndir == 0)
        return 0;
    return batch_groups(pl, &tok, lead, nl, B, kept, tangent_one, &c, e);
}

cxf_error *clnode_xla_jvp(cxf_call_frame *f)
{
    return handle_timed(f, jvp_run, &g_jvp_ns, &g_jvps);
}
