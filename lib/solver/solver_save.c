/* solver_save.c - saving: the solution object and its accessors, the saved steps' growth between
 * groups of steps, and the read-back of every result into the solution after the loop. */
#include "solver/solver_internal.h"

void clnode_solution_destroy(clnode_solution **ps)
{
    if (!ps || !*ps)
        return;
    clnode_solution *s = *ps;
    free(s->stats);
    free(s->y_final);
    free(s->first_ts);
    cln_tape_free(s->tape);
    for (int k = 0; k < 4; ++k) {
        free(s->count[k]);
        free(s->ts[k]);
        free(s->ys[k]);
    }
    free(s);
    *ps = NULL;
}

size_t clnode_solution_batch(const clnode_solution *s)
{
    return s->B;
}

size_t clnode_solution_dim(const clnode_solution *s)
{
    return s->N;
}

long clnode_solution_syncs(const clnode_solution *s)
{
    return s->syncs;
}

clnode_status clnode_solution_stats_sized(const clnode_solution *s, size_t traj,
                                          clnode_trajectory_stats *stats, size_t size)
{
    if (!s || !stats || traj >= s->B ||
        cln_check_struct_size(NULL, "", size, CLN_TRAJECTORY_STATS_MIN, sizeof *stats))
        return CLNODE_ERR_INVALID_ARGUMENT;
    clnode_trajectory_stats t = s->stats[traj];
    cln_struct_fill(stats, size, &t, sizeof t);
    return CLNODE_OK;
}

const double *clnode_solution_y_final(const clnode_solution *s, size_t traj)
{
    /* an imported tape holds no final states (y_final NULL) */
    return s && traj < s->B && s->y_final ? s->y_final + traj * s->N : NULL;
}

clnode_status clnode_solution_saved(const clnode_solution *s, size_t traj, clnode_save_kind kind,
                                    size_t *n, const double **ts, const double **ys)
{
    if (!s || traj >= s->B || (unsigned)kind > CLNODE_SAVE_T1 || !n)
        return CLNODE_ERR_INVALID_ARGUMENT;
    const size_t cap = s->cap[kind];
    /* save_ts shared by trajectories with their own intervals: each reports its own run */
    const size_t first = kind == CLNODE_SAVE_TS && cap ? s->first_ts[traj] : 0;
    *n = s->count[kind] ? s->count[kind][traj] : 0;
    if (ts)
        *ts = cap ? s->ts[kind] + traj * cap + first : NULL;
    if (ys)
        *ys = cap && s->ys[kind] ? s->ys[kind] + (traj * cap + first) * s->N : NULL;
    return CLNODE_OK;
}

size_t cln_solution_capacity(const clnode_solution *s, clnode_save_kind kind)
{
    return s && (unsigned)kind <= CLNODE_SAVE_T1 ? s->cap[kind] : 0;
}

/* ---- reading the results back ---- */

/* The solution object with room for every saved point the options ask for: `steps` points per
 * trajectory for the saved steps (the most any trajectory saved). */
static clnode_status cln_solution_alloc(clnode_context *ctx, const clnode_solve_options *o,
                                        size_t n_save_ts, size_t B, size_t N, size_t steps,
                                        clnode_solution **out)
{
    clnode_solution *s = calloc(1, sizeof *s);
    CLN_CHECK(ctx, s, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the solution");
    s->B = B;
    s->N = N;
    s->cap[CLNODE_SAVE_T0] = o->save_t0 ? 1 : 0;
    s->cap[CLNODE_SAVE_TS] = n_save_ts;
    s->cap[CLNODE_SAVE_STEPS] = o->save_steps ? steps : 0;
    s->cap[CLNODE_SAVE_T1] = o->save_t1 ? 1 : 0;
    const int saved[4] = {o->save_t0, n_save_ts > 0, o->save_steps, o->save_t1};
    size_t bn, bc, bcn;
    s->stats = calloc(B, sizeof *s->stats);
    s->y_final = cln_mul_size(B, N, &bn) ? calloc(bn, sizeof(double)) : NULL;
    int ok = s->stats && s->y_final;
    for (int k = 0; k < 4 && ok; ++k) {
        if (!saved[k])
            continue;
        s->count[k] = calloc(B, sizeof(size_t));
        ok = s->count[k] != NULL;
        if (!s->cap[k] || !ok)
            continue; /* saved steps, none taken: counts only */
        const int fits = cln_mul_size(B, s->cap[k], &bc) && cln_mul_size(bc, N, &bcn);
        s->ts[k] = fits ? calloc(bc, sizeof(double)) : NULL;
        s->ys[k] = fits ? calloc(bcn, sizeof(double)) : NULL;
        ok = s->ts[k] && s->ys[k];
    }
    if (ok && s->cap[CLNODE_SAVE_TS]) {
        s->first_ts = calloc(B, sizeof(size_t));
        ok = s->first_ts != NULL;
    }
    if (!ok) {
        clnode_solution_destroy(&s);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the solution of %zu x %zu",
                        B, N);
    }
    *out = s;
    return CLNODE_OK;
}

void cln_fill_stats(const cln_run *r, clnode_trajectory_stats *t, const cln_rstate_d *rs,
                    const cln_istate *is)
{
    const clnode_solve_options *o = r->o;
    const clnode_method *m = r->m;
    t->struct_size = sizeof *t;
    t->result = (clnode_result)is->result;
    t->num_steps = is->nsteps;
    t->num_accepted = is->nacc;
    t->num_rejected = is->nrej;
    const int steps = rs->tau0 < rs->tau1; /* t0 != t1 */
    /* dt0_auto: two evaluations more; an FSAL method's first step reuses the selection's f0 */
    const long sel = o->dt0_auto && steps ? 2 : 0;
    t->num_rhs_evals = m->fsal ? (sel ? sel : 1) + (long)(m->stages - 1) * t->num_steps
                               : sel + (long)m->stages * t->num_steps;
    t->first_step = steps ? r->dir * rs->dt0 : 0.0;
    t->t_final = r->dir * rs->t;
}

/* Trajectory b's statistics and saved points from its final state rows (the y_final, dense
 * output and saved steps are already read back). */
static void cln_fill_trajectory(const cln_run *r, clnode_solution *s, size_t b,
                                const cln_rstate_d *rs, const cln_istate *is)
{
    const clnode_solve_options *o = r->o;
    const clnode_problem *p = r->p;
    const double *y0 = p->y0;
    const clnode_precision prec = r->sd.prec;
    const size_t N = s->N;
    clnode_trajectory_stats *t = &s->stats[b];
    cln_fill_stats(r, t, rs, is);
    if (s->cap[CLNODE_SAVE_T0]) {
        s->count[CLNODE_SAVE_T0][b] = 1;
        s->ts[CLNODE_SAVE_T0][b] = cln_round(prec, cln_t0(o, p, b));
        for (size_t n = 0; n < N; ++n)
            s->ys[CLNODE_SAVE_T0][b * N + n] = cln_round(prec, y0[b * N + n]);
    }
    if (s->cap[CLNODE_SAVE_TS]) {
        /* the run of the shared list inside this trajectory's interval starts at the first time
         * not before tau0, the comparison cln_save_dense makes (in tau, state precision); a row
         * of its own lies inside its interval (validated), so its run starts at 0 */
        const size_t nt = p->n_save_ts;
        const double *ts = p->save_ts + (p->save_ts_per_trajectory ? b * nt : 0);
        size_t first = 0;
        while (first < nt && CLN_TS_BEFORE_START(r->dir * cln_round(prec, ts[first]), rs->tau0))
            ++first;
        size_t end = (size_t)is->nts;
        if (cln_t0(o, p, b) == cln_t1(o, p, b)) { /* diffrax: every requested time receives y0 */
            end = first;
            CLN_TS_STEP_LOOP(end, nt, r->dir * cln_round(prec, ts[end]), rs->tau1)
            {
            }
            for (size_t j = first; j < end; ++j)
                memcpy(s->ys[CLNODE_SAVE_TS] + (b * nt + j) * N, s->y_final + b * N,
                       N * sizeof(double));
        }
        s->first_ts[b] = first;
        s->count[CLNODE_SAVE_TS][b] = end > first ? end - first : 0;
        for (size_t j = 0; j < nt; ++j)
            s->ts[CLNODE_SAVE_TS][b * nt + j] = cln_round(prec, ts[j]);
    }
    if (s->count[CLNODE_SAVE_STEPS])
        s->count[CLNODE_SAVE_STEPS][b] = (size_t)is->nsteps_saved;
    if (s->cap[CLNODE_SAVE_T1]) {
        s->count[CLNODE_SAVE_T1][b] = 1;
        s->ts[CLNODE_SAVE_T1][b] = t->t_final;
        memcpy(s->ys[CLNODE_SAVE_T1] + b * N, s->y_final + b * N, N * sizeof(double));
    }
}

/* The saved steps into the solution, rows packed to its capacity (the most points any
 * trajectory saved, <= r->steps_cap). */
static clnode_status cln_collect_steps(cln_run *r, clnode_solution *s)
{
    const size_t cap = s->cap[CLNODE_SAVE_STEPS];
    clnode_status st = cln_download_rows(r, r->sd.STT, 1, cap, s->ts[CLNODE_SAVE_STEPS]);
    if (st == CLNODE_OK)
        st = cln_download_rows(r, r->sd.STY, r->sd.N, cap, s->ys[CLNODE_SAVE_STEPS]);
    return st;
}

/* Phase 6: allocates the solution and reads every result back (one transfer per buffer; rows
 * past Breal are padding and are not read), in the caller's order of trajectories. */
clnode_status cln_collect(cln_run *r, clnode_solution **out)
{
    const clnode_solve_options *o = r->o;
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, N = sd->N;
    clnode_solution *s = NULL;
    clnode_status st = CLNODE_OK;
    cln_rstate_d *rs = calloc(B, sizeof *rs);
    cln_istate *is = calloc(B, sizeof *is);
    if (!rs || !is) {
        st = cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the final states");
        goto fail;
    }
    CLN_TRY(st, cln_download(be, sd, sd->RS, 0, (double *)(void *)rs, B * CLN_RSTATE_REALS));
    CLN_TRY(st, be->ops->buf_read(be, sd->IS, 0, B * sizeof *is, is));
    size_t steps = 0; /* the most points a trajectory saved */
    for (size_t row = 0; r->dev_steps && row < B; ++row)
        if ((size_t)is[row].nsteps_saved > steps)
            steps = (size_t)is[row].nsteps_saved;
    if (steps > r->steps_cap) {
        st = cln_fail(r->ctx, CLNODE_ERR_INTERNAL,
                      "a trajectory saved %zu steps, but the rows had room for %zu", steps,
                      r->steps_cap);
        goto fail;
    }
    CLN_TRY(st, cln_solution_alloc(r->ctx, o, r->p->n_save_ts, B, N, steps, &s));
    s->dir = r->dir;
    CLN_TRY(st, cln_download(be, sd, sd->Y, 0, s->y_final, B * N));
    if (s->cap[CLNODE_SAVE_TS])
        CLN_TRY(st,
                cln_download(be, sd, sd->TSOUT, 0, s->ys[CLNODE_SAVE_TS], B * r->p->n_save_ts * N));
    CLN_TRY(st, cln_collect_steps(r, s));
    if (r->compactions)
        CLN_TRY(st, cln_unpermute_solution(r, s));
    for (size_t row = 0; row < B; ++row) /* trajectory perm[row]'s state rows */
        cln_fill_trajectory(r, s, r->compactions ? r->perm[row] : row, &rs[row], &is[row]);
    if (o->keep_tape)
        CLN_TRY(st, cln_keep_tape(r, s, is, steps));
    free(rs);
    free(is);
    *out = s;
    return CLNODE_OK;
fail:
    free(rs);
    free(is);
    clnode_solution_destroy(&s);
    return st;
}

/* The saved steps' growth, between two groups of steps (where the loop has just waited for the
 * device, or before the first group). Each attempted step saves at most one point per trajectory,
 * so after `it` attempts no row holds more than `it` points, and room for min(max_steps, it +
 * group) points per row covers the next group. When the rows are shorter, STT and STY are
 * replaced by buffers with rows twice as long (at least that long, at most max_steps): every
 * trajectory's points are copied to the new rows on the device (copy_rows, frozen rows too; no
 * round trip through the host), the old buffers freed, the capacity written into KI and the
 * backend's kernels pointed at the new buffers (solve_rebind). Doubling keeps the growths to
 * O(log steps) per solve and the copies to O(points) in all, and the memory follows the longest
 * trajectory instead of max_steps. Never called per step. */
clnode_status cln_grow_steps(cln_run *r, long it, long group)
{
    const clnode_solve_options *o = r->o;
    const size_t ms = (size_t)o->max_steps;
    size_t need = (size_t)it + (size_t)group;
    need = need < ms ? need : ms;
    if (!r->dev_steps || r->steps_cap >= need)
        return CLNODE_OK;
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t old = r->steps_cap, es = sd->esize, N = sd->N;
    size_t cap = old <= ms / 2 ? 2 * old : ms;
    cap = cap > need ? cap : need;
    size_t nt, ny;
    CLN_CHECK(
        r->ctx, cln_mul_size(sd->B, cap, &nt) && cln_mul_size(nt, N, &ny), CLNODE_ERR_OUT_OF_MEMORY,
        "the saved steps of %zu trajectories, %zu points each, do not fit in memory", sd->B, cap);
    clnode_status st = CLNODE_OK;
    cln_buf *stt = NULL, *sty = NULL;
    CLN_TRY(st, cln_alloc(r, &stt, nt, es));
    CLN_TRY(st, cln_alloc(r, &sty, ny, es));
    /* rows past Breal are padding and never save */
    CLN_TRY(st,
            be->ops->copy_rows(be, stt, 0, cap * es, sd->STT, 0, old * es, old * es, sd->Breal));
    CLN_TRY(st, be->ops->copy_rows(be, sty, 0, cap * N * es, sd->STY, 0, old * N * es, old * N * es,
                                   sd->Breal));
    cln_buf *t = sd->STT; /* the new buffers in, the old ones freed below */
    sd->STT = stt;
    stt = t;
    t = sd->STY;
    sd->STY = sty;
    sty = t;
    r->steps_cap = cap;
    /* the whole struct: a checker such as Oclgrind tracks a buffer's initialised bytes from the
     * last host store that covers it */
    r->KI.steps_cap = (int32_t)cap;
    CLN_TRY(st, be->ops->buf_write(be, sd->CI, 0, sizeof r->KI, &r->KI));
    if (be->ops->solve_rebind)
        CLN_TRY(st, be->ops->solve_rebind(be, sd));
    cln_log(r->ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "saved steps: room for %zu points per trajectory (was %zu) after %ld steps", cap, old,
            it);
fail:
    be->ops->buf_free(be, stt);
    be->ops->buf_free(be, sty);
    return st;
}
