/* _clnode_xla_fwd.c - clnode.jax's XLA custom calls: the forward handler
 * (_clnode_xla_internal.h). */
#include "_clnode_xla_internal.h"

#include <stdlib.h>

/* ------------------------------------------------------------------------------------------------
 * The forward handler: operands y0, t0, t1, dt0, ts, args, scale, params, ctrl (each with none or
 * the batch's leading axes); results ts (lead, T), ys (lead, T, N), counts (lead, 4) int32 (steps,
 * accepted, rejected, diffrax's result code), token (lead) int32; attributes plan, keep. */

static const int32_t DIFFRAX_CODE[] = {0, 1, 2, 1, 2}; /* by clnode_result */
int fwd_run(cxf_call_frame *f, xla_fail *e)
{
    if (read_frame(f, XLA_NOPS, 4, "the forward solve", e))
        return -1;
    const xla_plan *pl = frame_plan(f, "the forward solve", e);
    if (!pl)
        return -1;
    int64_t keep = 0, lead[XLA_MAX_LEAD];
    attr_int(f, "keep", &keep);
    cxf_buffer *const *r = (cxf_buffer *const *)f->rets.rets;
    size_t nl, B;
    if (lead_of(r[1], 2, lead, &nl, &B, e))
        return -1;
    if (r[1]->dims[nl] != (int64_t)pl->T || r[1]->dims[nl + 1] != (int64_t)pl->n ||
        r[1]->dtype != (pl->y_f64 ? CXF_F64 : CXF_F32) ||
        r[0]->dtype != (pl->t_f64 ? CXF_F64 : CXF_F32) || r[2]->dtype != CXF_S32 ||
        r[3]->dtype != CXF_S32)
        return fail(e, CLNODE_ERR_INVALID_ARGUMENT,
                    "clnode: the forward solve's results have other shapes or dtypes than its "
                    "plan's (%zu slots of %zu)",
                    pl->T, pl->n);
    xla_op ops[XLA_NOPS];
    if (read_operands(f, 0, pl, lead, nl, ops, e))
        return -1;
    if (B == 0)
        return 0;
    size_t *sel = malloc(B * sizeof *sel);
    if (!sel)
        return fail(e, CLNODE_ERR_OUT_OF_MEMORY, "out of memory");
    for (size_t i = 0; i < B; i++)
        sel[i] = i;
    clnode_status st;
    xla_ctx *xc = ctx_take(pl->device, e->msg, sizeof e->msg, &st);
    if (!xc) {
        free(sel);
        e->st = st;
        return -1;
    }
    xla_batch x;
    clnode_model *model = NULL;
    clnode_solution *sol = NULL;
    int rc =
        batch_setup(pl, ops, lead, nl, sel, B, NULL, keep && pl->scale_traced, xc, &x, &model, e);
    if (!rc)
        rc = batch_solve(&x, model, xc, (int)keep, pl->checkpoint_every, &sol, e);
    pthread_mutex_lock(&g_lock);
    g_solves++;
    g_trajectories += B;
    pthread_mutex_unlock(&g_lock);
    int32_t *counts = r[2]->data, token = 0;
    int floor = 0;
    for (size_t b = 0; !rc && b < B; b++) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, b, &s);
        counts[4 * b + 0] = (int32_t)s.num_steps;
        counts[4 * b + 1] = (int32_t)s.num_accepted;
        counts[4 * b + 2] = (int32_t)s.num_rejected;
        counts[4 * b + 3] = (unsigned)s.result < 5 ? DIFFRAX_CODE[s.result] : 1;
        floor |= s.result == CLNODE_RESULT_PRECISION_FLOOR;
    }
    if (!rc && pl->throw_ && floor)
        rc = fail(e, CLNODE_ERR_PRECISION, "%s",
                  xc->floor[0] ? xc->floor
                               : "precision_floor: trajectories stopped at the rounding floor: "
                                 "the rtol is below what this arithmetic resolves");
    if (!rc) {
        if (!pl->y_f64)
            st = clnode_solution_rows_f32(sol, 0, B, pl->T, r[0]->data, r[1]->data);
        else if (pl->t_f64)
            st = clnode_solution_rows_f64(sol, 0, B, pl->T, r[0]->data, r[1]->data);
        else {
            double *ts = malloc(B * pl->T * sizeof *ts);
            st = ts ? clnode_solution_rows_f64(sol, 0, B, pl->T, ts, r[1]->data)
                    : CLNODE_ERR_OUT_OF_MEMORY;
            for (size_t i = 0; ts && st == CLNODE_OK && i < B * pl->T; i++)
                ((float *)r[0]->data)[i] = (float)ts[i];
            free(ts);
        }
        if (st != CLNODE_OK)
            rc = fail(e, st, "clnode: the solution does not fit its %zu slots", pl->T);
    }
    if (!rc && keep)
        token = tape_keep(&sol, &model);
    for (size_t b = 0; !rc && b < B; b++)
        ((int32_t *)r[3]->data)[b] = token;
    clnode_solution_destroy(&sol);
    clnode_model_destroy(&model);
    batch_free(&x);
    ctx_give(xc);
    free(sel);
    return rc;
}

cxf_error *clnode_xla_fwd(cxf_call_frame *f)
{
    return handle_timed(f, fwd_run, &g_fwd_ns, NULL);
}
