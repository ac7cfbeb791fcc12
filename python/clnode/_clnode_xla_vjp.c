/* _clnode_xla_vjp.c - clnode.jax's XLA custom calls: the reverse handler
 * (_clnode_xla_internal.h). */
#include "_clnode_xla_internal.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * The reverse handler: operands ct (lead, T, N), token (lead), the forward's 9 operands; one
 * result per wanted operand (attribute want: bits of y0 1, args 32, scale 64, params 128, in
 * the operands' order); attribute keep: bit a for leading axis a along which the batch-wide
 * cotangents are one per index (vmap of a gradient). */

typedef struct xla_grad_out {
    int which; /* the operand's index */
    cxf_buffer *b;
    xla_op shape; /* the result read as an operand of the batch */
} xla_grad_out;

static void put(cxf_buffer *b, size_t i, double v)
{
    if (b->dtype == CXF_F32)
        ((float *)b->data)[i] = (float)v;
    else
        ((double *)b->data)[i] = v;
}

/* One reverse pass of trajectories sel[0..m) (with the forward's tape when given), its
 * cotangents written into the results. */
static int reverse_one(const xla_plan *pl, const xla_op *ops, const xla_op *ct, const int64_t *lead,
                       size_t nl, const size_t *sel, size_t m, const int *kept_axis, xla_tape *tape,
                       xla_grad_out *outs, int nouts, int want_scale, xla_ctx *xc, xla_fail *e)
{
    xla_batch x;
    memset(&x, 0, sizeof x);
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    clnode_gradient *g = NULL;
    double *cot = NULL;
    int rc =
        batch_kept(pl, ops, lead, nl, sel, m, kept_axis, want_scale, tape, xc, &x, &model, &sol, e);
    if (!rc && !(cot = gather(ct, lead, nl, sel, m)))
        rc = fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the cotangent");
    if (!rc) {
        clnode_gradient_options go;
        clnode_gradient_default_options(&go);
        go.cancel = xla_on_cancel;
        const unsigned long long t0 = now_ns();
        const clnode_status st = clnode_gradient_compute(xc->ctx, model, &go, sol, pl->T, cot, &g);
        const unsigned long long dt = now_ns() - t0;
        pthread_mutex_lock(&g_lock);
        g_reverse_ns += dt;
        g_reverses++;
        pthread_mutex_unlock(&g_lock);
        if (st != CLNODE_OK)
            rc = fail(e, st, "%s", clnode_context_last_error(xc->ctx));
    }
    for (int i = 0; !rc && i < nouts; i++) {
        const xla_grad_out *o = &outs[i];
        const size_t N = pl->n;
        if (o->which == 0 || o->which == 5) { /* per trajectory */
            const double *v = o->which == 0 ? clnode_gradient_y0(g) : clnode_gradient_inputs(g);
            const size_t c = o->which == 0 ? N : pl->k;
            for (size_t t = 0; t < m; t++)
                for (size_t j = 0; j < c; j++)
                    put(o->b, sel[t] * c + j, v[t * c + j]);
            continue;
        }
        const size_t row = op_row(&o->shape, lead, nl, sel[0]);
        if (o->which == 6) {
            size_t ns = 0;
            const double *s = clnode_gradient_out_scale(g, &ns);
            for (size_t j = 0; j < N; j++)
                put(o->b, row * N + j, s && ns ? s[ns == 1 ? 0 : j] : 0.0);
        } else {
            size_t np = 0;
            const double *p = clnode_gradient_params(g, &np);
            for (size_t j = 0; j < pl->n_params; j++)
                put(o->b, row * pl->n_params + j, p[j]);
        }
    }
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    batch_free(&x);
    free(cot);
    return rc;
}

/* A call's reverse pass, for reverse_one per group (batch_groups) */
typedef struct vjp_call {
    const xla_plan *pl;
    const xla_op *ops, *ct;
    const int64_t *lead;
    size_t nl;
    xla_grad_out *outs;
    int nouts, want_scale;
} vjp_call;

static int reverse_group(void *user, const size_t *sel, size_t m, const int *kept_axis,
                         xla_tape *tape, xla_ctx *xc, xla_fail *e)
{
    const vjp_call *c = user;
    return reverse_one(c->pl, c->ops, c->ct, c->lead, c->nl, sel, m, kept_axis, tape, c->outs,
                       c->nouts, c->want_scale, xc, e);
}

int vjp_run(cxf_call_frame *f, xla_fail *e)
{
    if (read_frame(f, 2 + XLA_NOPS, -1, "the reverse pass", e))
        return -1;
    const xla_plan *pl = frame_plan(f, "the reverse pass", e);
    if (!pl)
        return -1;
    int64_t want = 0, keep = 0, lead[XLA_MAX_LEAD];
    attr_int(f, "want", &want);
    attr_int(f, "keep", &keep);
    const cxf_buffer *ctb = f->args.args[0];
    size_t nl, B;
    if (!CXF_COVERS(ctb, cxf_buffer, dims) || lead_of(ctb, 2, lead, &nl, &B, e))
        return -1;
    xla_op ct, tok, ops[XLA_NOPS];
    const int64_t ct_core[2] = {(int64_t)pl->T, (int64_t)pl->n};
    if (op_read(&ct, ctb, "the cotangent of ys", 2, ct_core, lead, nl,
                pl->y_f64 ? CXF_F64 : CXF_F32, e) ||
        op_read(&tok, f->args.args[1], "token", 0, NULL, lead, nl, CXF_S32, e) ||
        read_operands(f, 2, pl, lead, nl, ops, e))
        return -1;
    xla_grad_out outs[4];
    int nouts = 0;
    for (int i = 0; i < 8; i++)
        if (want & (1 << i)) {
            if (nouts == 4 || nouts >= f->rets.size || (i != 0 && i != 5 && i != 6 && i != 7))
                return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                            "clnode: the reverse pass: attribute want %lld, %lld results",
                            (long long)want, (long long)f->rets.size);
            outs[nouts].which = i;
            outs[nouts].b = f->rets.rets[nouts];
            const int64_t core = (int64_t)ops[i].core;
            if (op_read(&outs[nouts].shape, outs[nouts].b, NAMES[i], 1, &core, lead, nl,
                        ops[i].b->dtype, e))
                return -1;
            nouts++;
        }
    if (nouts != f->rets.size)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the reverse pass gives %d results, not %lld", nouts,
                    (long long)f->rets.size);
    /* the axes along which the batch-wide cotangents are one per index */
    int kept[XLA_MAX_LEAD] = {0};
    for (size_t a = 0; a < nl; a++) {
        kept[a] = (keep >> a) & 1;
        for (int i = 6; i < 8; i++)
            kept[a] |= ops[i].nl && ops[i].dims[a] > 1;
    }
    for (int i = 0; i < nouts; i++) { /* zeros where no trajectory writes (an empty batch) */
        size_t elems = 1;
        for (int64_t a = 0; a < outs[i].b->rank; a++)
            elems *= (size_t)outs[i].b->dims[a];
        memset(outs[i].b->data, 0, elems * (outs[i].b->dtype == CXF_F32 ? 4 : 8));
    }
    vjp_call c = {pl, ops, &ct, lead, nl, outs, nouts, (int)((want >> 6) & 1)};
    return batch_groups(pl, &tok, lead, nl, B, kept, reverse_group, &c, e);
}

cxf_error *clnode_xla_vjp(cxf_call_frame *f)
{
    return handle_timed(f, vjp_run, &g_vjp_ns, &g_vjps);
}
