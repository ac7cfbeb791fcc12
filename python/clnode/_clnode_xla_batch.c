/* _clnode_xla_batch.c - clnode.jax's XLA custom calls: one batch: the solve of some trajectories of
 * a call's operands
 * (_clnode_xla_internal.h). */
#include "_clnode_xla_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------------
 * One batch: the solve of trajectories sel[0..m) of the operands */

void batch_free(xla_batch *x)
{
    free(x->y0);
    free(x->t0s);
    free(x->t1s);
    free(x->dt0s);
    free(x->inputs);
    free(x->ts);
    free(x->params);
    free(x->scale);
    memset(x, 0, sizeof *x);
}

/* Gathers rows of o for sel[0..m) into a new (m x core) array; NULL on no memory. */
double *gather(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m)
{
    double *out = malloc((m ? m : 1) * (o->core ? o->core : 1) * sizeof *out);
    for (size_t i = 0; out && i < m; i++) { /* a row at a time, converted as op_at does */
        const size_t r = op_row(o, lead, nl, sel[i]), c = o->core;
        double *dst = out + i * c;
        if (o->b->dtype == CXF_F32) {
            const float *src = (const float *)o->b->data + r * c;
            for (size_t j = 0; j < c; j++)
                dst[j] = (double)src[j];
        } else {
            memcpy(dst, (const double *)o->b->data + r * c, c * sizeof *dst);
        }
    }
    return out;
}

/* One value per trajectory (*arr, m values) or one for all (*arr NULL, *scalar): as
 * clnode.jax's callback passes t0, t1 and dt0. */
int per_traj(const xla_op *o, const int64_t *lead, size_t nl, const size_t *sel, size_t m,
             double *scalar, double **arr)
{
    *arr = NULL;
    *scalar = m ? op_at(o, op_row(o, lead, nl, sel[0]), 0) : 0.0;
    if (!op_varies(o, lead, nl, sel, m))
        return 0;
    *arr = gather(o, lead, nl, sel, m);
    return *arr ? 0 : -1;
}

/* batch_setup, and with arrays 0 its part without y0, args and the save times (which the
 * CUDA forward leaves on the device). */
static int setup(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
                 const size_t *sel, size_t m, const int *kept_axis, int scale_vector,
                 clnode_context *ctx, xla_batch *x, clnode_model **model, xla_fail *e, int arrays)
{
    memset(x, 0, sizeof *x);
    x->B = m;
    x->o = pl->opts;
    if (pl->n_ctrl) { /* this call's controller numbers (the operand ctrl) */
        if (op_varies(&ops[8], lead, nl, sel, m))
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode.jax.diffeqsolve: the step size controller's %s changes from "
                        "trajectory to trajectory (clnode solves a batch with one controller)",
                        pl->ctrl_names[0]);
        const size_t row = op_row(&ops[8], lead, nl, sel[0]);
        for (size_t j = 0; j < pl->n_ctrl; j++) {
            char text[40], msg[320];
            snprintf(text, sizeof text, "%.17g", op_at(&ops[8], row, j));
            if (clnode_solve_option_parse(&x->o, pl->ctrl_names[j], text, msg, sizeof msg) !=
                CLNODE_OK)
                return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                            "clnode.jax.diffeqsolve: PIDController(%s=%s): %s", pl->ctrl_names[j],
                            text, msg);
        }
    }
    clnode_problem_default(&x->p);
    x->p.batch = m;
    const size_t N = pl->n;
    double t0, t1, dt0;
    x->y0 = arrays ? gather(&ops[0], lead, nl, sel, m) : NULL;
    if ((arrays && !x->y0) || per_traj(&ops[1], lead, nl, sel, m, &t0, &x->t0s) ||
        per_traj(&ops[2], lead, nl, sel, m, &t1, &x->t1s) ||
        per_traj(&ops[3], lead, nl, sel, m, &dt0, &x->dt0s))
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the batch's operands");
    x->p.y0 = x->y0;
    x->p.t0s = x->t0s;
    x->p.t1s = x->t1s;
    x->p.dt0s = x->dt0s;
    if (!x->t0s)
        x->o.t0 = t0;
    if (!x->t1s)
        x->o.t1 = t1;
    if (!x->dt0s && dt0 != 0.0)
        x->o.dt0 = dt0;
    if (pl->k && arrays) {
        if (!(x->inputs = gather(&ops[5], lead, nl, sel, m)))
            return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for args");
        x->p.inputs = x->inputs;
    }
    if (pl->has_ts && arrays) {
        /* one list for the batch unless the save times vary along an axis solved together */
        int rows = 0;
        for (size_t a = 0; a < ops[4].nl; a++)
            rows |= ops[4].dims[a] != 1 && !(kept_axis && kept_axis[a]);
        const size_t one = sel[0];
        if (!(x->ts = gather(&ops[4], lead, nl, rows ? sel : &one, rows ? m : 1)))
            return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the save times");
        x->p.save_ts = x->ts;
        x->p.n_save_ts = pl->n_ts;
        x->p.save_ts_per_trajectory = rows;
    }
    if (op_varies(&ops[7], lead, nl, sel, m))
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode.jax.diffeqsolve: vmapping over the model's parameters is not "
                    "supported (clnode solves one model for every trajectory of a batch; vmap "
                    "over y0, t0, t1, dt0, args and SaveAt(ts=...))");
    if (ops[7].core != pl->n_params)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: operand params has %zu values; the network has %zu", ops[7].core,
                    pl->n_params);
    const size_t first = sel[0];
    if (!(x->params = gather(&ops[7], lead, nl, &first, 1)))
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the parameters");
    if (pl->has_scale) {
        if (op_varies(&ops[6], lead, nl, sel, m))
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode.jax.diffeqsolve: the factor s of the field's network changes "
                        "from trajectory to trajectory (clnode solves one model for a batch)");
        if (!(x->scale = gather(&ops[6], lead, nl, &first, 1)))
            return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory for the factor");
        int finite = 1, same = 1, ones = 1;
        for (size_t j = 0; j < N; j++) {
            finite &= isfinite(x->scale[j]) != 0;
            same &= x->scale[j] == x->scale[0];
            ones &= x->scale[j] == 1.0;
        }
        if (scale_vector)
            x->n_scale = N;
        else if (!finite)
            return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                        "clnode.jax.diffeqsolve: the factor s of the field's network is not "
                        "finite");
        else
            x->n_scale = ones ? 0 : same ? 1 : N;
    }
    const double *w[XLA_MAX_LAYERS], *bs[XLA_MAX_LAYERS];
    size_t off = 0;
    for (size_t l = 0; l < pl->L; l++) {
        w[l] = x->params + off;
        off += pl->sizes[l + 1] * pl->sizes[l];
        bs[l] = pl->has_bias[l] ? x->params + off : NULL;
        off += pl->has_bias[l] ? pl->sizes[l + 1] : 0;
    }
    clnode_model_desc d;
    clnode_model_default_desc(&d);
    d.num_layers = pl->L;
    d.sizes = pl->sizes;
    d.weights = w;
    d.biases = bs;
    d.activation = pl->act;
    d.final_activation = pl->fin;
    d.time_input = pl->time_input;
    d.num_inputs = pl->k;
    d.out_scale = x->n_scale ? x->scale : NULL;
    d.out_scale_size = x->n_scale;
    const clnode_status st = clnode_model_create(ctx, &d, model);
    if (st != CLNODE_OK)
        return fail(e, st, "%s", clnode_context_last_error(ctx));
    return 0;
}

/* The solve's options, problem and model of trajectories sel[0..m) (m >= 1); scale_vector: the
 * model's output scale one value per component (for the factor's gradient). Returns 0, or -1
 * with e set. */
int batch_setup(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
                const size_t *sel, size_t m, const int *kept_axis, int scale_vector, xla_ctx *xc,
                xla_batch *x, clnode_model **model, xla_fail *e)
{
    return setup(pl, ops, lead, nl, sel, m, kept_axis, scale_vector, xc->ctx, x, model, e, 1);
}

int batch_setup_scalars(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
                        size_t m, int scale_vector, clnode_context *ctx, xla_batch *x,
                        clnode_model **model, xla_fail *e)
{
    size_t *sel = malloc((m ? m : 1) * sizeof *sel);
    if (!sel)
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < m; i++)
        sel[i] = i;
    const int rc = setup(pl, ops, lead, nl, sel, m, NULL, scale_vector, ctx, x, model, e, 0);
    free(sel);
    return rc;
}

/* Solves the batch on xc (cancellable by Ctrl-C). */
int batch_solve(xla_batch *x, const clnode_model *model, xla_ctx *xc, int keep, long ckpt,
                clnode_solution **sol, xla_fail *e)
{
    x->o.keep_tape = keep;
    if (keep)
        x->o.checkpoint_every = ckpt;
    x->o.cancel = xla_on_cancel;
    x->o.cancel_user = NULL;
    const unsigned long long t0 = now_ns();
    const clnode_status st = clnode_solve(xc->ctx, model, &x->o, &x->p, sol);
    const unsigned long long dt = now_ns() - t0;
    pthread_mutex_lock(&g_lock);
    g_solve_ns += dt;
    pthread_mutex_unlock(&g_lock);
    if (st != CLNODE_OK)
        return fail(e, st, "%s", clnode_context_last_error(xc->ctx));
    return 0;
}

/* The forward's tape of a batch of B trajectories whose token operand is tok (one token for the
 * whole batch; NULL, counted as a miss, when there is none or the trajectories' tokens differ). */
xla_tape *batch_tape(const xla_op *tok, const int64_t *lead, size_t nl, size_t B)
{
    int32_t token = 0;
    int same = B > 0;
    for (size_t b = 0; b < B; b++) {
        const int32_t v = ((const int32_t *)tok->b->data)[op_row(tok, lead, nl, b)];
        if (b == 0)
            token = v;
        same &= v == token;
    }
    xla_tape *tape = same && token < 0 ? tape_take(token, 1) : NULL;
    if (!same || token >= 0) {
        pthread_mutex_lock(&g_lock);
        g_misses += B > 0;
        pthread_mutex_unlock(&g_lock);
    }
    return tape;
}

/* The trajectories of group gi (those whose coordinates along the kept axes are gi's, in C
 * order) into sel; returns how many. */
size_t group_members(const int64_t *lead, size_t nl, size_t B, const int *kept, size_t gi,
                     size_t *sel)
{
    size_t m = 0;
    for (size_t b = 0; b < B; b++) {
        size_t rest = b, gidx = 0, gstride = 1;
        for (size_t a = nl; a-- > 0;) {
            const size_t i = rest % (size_t)lead[a];
            rest /= (size_t)lead[a];
            if (kept[a]) {
                gidx += i * gstride;
                gstride *= (size_t)lead[a];
            }
        }
        if (gidx == gi)
            sel[m++] = b;
    }
    return m;
}

/* Runs fn once per group of the batch (the trajectories that share their coordinates along the
 * kept axes; one group covering the batch when no axis is kept, which gets the forward's tape,
 * read from the token operand tok) on a context of the plan's device. Returns 0, or -1 with e
 * set. */
int batch_groups(const xla_plan *pl, const xla_op *tok, const int64_t *lead, size_t nl, size_t B,
                 const int *kept, xla_group_fn fn, void *user, xla_fail *e)
{
    int any = 0;
    size_t groups = 1;
    for (size_t a = 0; a < nl; a++) {
        any |= kept[a];
        groups *= kept[a] ? (size_t)lead[a] : 1;
    }
    xla_tape *tape = batch_tape(tok, lead, nl, B);
    if (any && tape) {
        tape_free(tape);
        tape = NULL;
    }
    if (B == 0)
        return 0;
    size_t *sel = malloc(B * sizeof *sel);
    clnode_status st = CLNODE_ERR_OUT_OF_MEMORY;
    xla_ctx *xc = sel ? ctx_take(pl->device, e->msg, sizeof e->msg, &st) : NULL;
    int rc = 0;
    if (!sel)
        rc = fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory");
    else if (!xc) {
        e->st = st;
        rc = -1;
    }
    for (size_t gi = 0; !rc && gi < groups; gi++) {
        const size_t m = group_members(lead, nl, B, kept, gi, sel);
        rc = fn(user, sel, m, any ? kept : NULL, tape, xc, e);
    }
    if (tape)
        tape_free(tape);
    if (xc)
        ctx_give(xc);
    free(sel);
    return rc;
}

/* The model and kept solution of trajectories sel[0..m): the forward's tape's (moved out of it)
 * when given, else solved keeping the tape (the same steps and bits) into x. Returns 0, or -1 with
 * e set. */
int batch_kept(const xla_plan *pl, const xla_op *ops, const int64_t *lead, size_t nl,
               const size_t *sel, size_t m, const int *kept_axis, int scale_vector, xla_tape *tape,
               xla_ctx *xc, xla_batch *x, clnode_model **model, clnode_solution **sol, xla_fail *e)
{
    if (tape) {
        *model = tape->model;
        *sol = tape->sol;
        tape->model = NULL;
        tape->sol = NULL;
        return 0;
    }
    if (batch_setup(pl, ops, lead, nl, sel, m, kept_axis, scale_vector, xc, x, model, e))
        return -1;
    return batch_solve(x, *model, xc, 1, pl->checkpoint_every, sol, e);
}
