/* solver_compact.c - active-set compaction: the live rows moved to the front of every
 * per-trajectory buffer between groups of steps, and the solution's rows moved back to their
 * trajectories after the solve. */
#include "solver/solver_internal.h"

/* Rows moved by compaction back to their trajectories, in place: row r of `a` (row_len values
 * each, n rows) holds the values of trajectory perm[r]; cycle by cycle, with one row of carry. */
static void cln_unpermute(double *a, size_t row_len, const size_t *perm, size_t n,
                          unsigned char *seen, double *carry)
{
    if (!row_len)
        return;
    memset(seen, 0, n);
    for (size_t r0 = 0; r0 < n; ++r0) {
        if (seen[r0] || perm[r0] == r0)
            continue;
        memcpy(carry, a + r0 * row_len, row_len * sizeof *a);
        for (size_t r = perm[r0]; r != r0; r = perm[r]) { /* carry holds the values of row r */
            double *row = a + r * row_len;
            for (size_t k = 0; k < row_len; ++k) {
                const double v = row[k];
                row[k] = carry[k];
                carry[k] = v;
            }
            seen[r] = 1;
        }
        memcpy(a + r0 * row_len, carry, row_len * sizeof *a);
        seen[r0] = 1;
    }
}

/* After compaction: every per-trajectory array of the solution read back so far (final states,
 * dense output, saved steps) in the caller's order. */
clnode_status cln_unpermute_solution(const cln_run *r, clnode_solution *s)
{
    const size_t B = r->sd.Breal, N = r->sd.N;
    const size_t nts = s->cap[CLNODE_SAVE_TS], ms = s->cap[CLNODE_SAVE_STEPS];
    size_t len = N;
    len = nts * N > len ? nts * N : len;
    len = ms * N > len ? ms * N : len;
    unsigned char *seen = malloc(B);
    double *carry = malloc(len * sizeof *carry);
    if (!seen || !carry) {
        free(seen);
        free(carry);
        return cln_fail(r->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the reordering");
    }
    cln_unpermute(s->y_final, N, r->perm, B, seen, carry);
    if (nts)
        cln_unpermute(s->ys[CLNODE_SAVE_TS], nts * N, r->perm, B, seen, carry);
    if (ms) {
        cln_unpermute(s->ts[CLNODE_SAVE_STEPS], ms, r->perm, B, seen, carry);
        cln_unpermute(s->ys[CLNODE_SAVE_STEPS], ms * N, r->perm, B, seen, carry);
    }
    free(seen);
    free(carry);
    return CLNODE_OK;
}

/* A per-trajectory buffer as compaction moves it: rows `stride` bytes apart from byte `off`, of
 * which the first `len` are moved. */
typedef struct cln_row_move {
    cln_buf *buf;
    size_t off, stride, len; /* bytes */
} cln_row_move;

/* Active-set compaction, at a point where the loop has just waited for the device (the active
 * count): when a quarter or more of the live rows [0, live) are frozen, their integer state rows
 * are read back, each frozen row among the first `active` is swapped with a running row after
 * them (every per-trajectory buffer: state, stage derivatives, stage argument with the
 * conditioning inputs, each trajectory's own save times when it has them, saved points; the saved
 * steps' rows at their current capacity), and live
 * drops to `active` rounded up to the backend's row alignment. Rows are independent in every pass
 * and product, so no trajectory's arithmetic changes; r->perm records where each trajectory went,
 * and cln_collect puts the results back in the caller's order. Allocates nothing. */
clnode_status cln_compact(cln_run *r, size_t active)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t align = be->row_align ? be->row_align : 1, live = sd->live;
    if (!r->compact || active == 0 || live - active < live / 4 ||
        (active + align - 1) / align * align >= live)
        return CLNODE_OK;
    /* running trajectories only ever move down, so rows from Breal on (padding) never hold one */
    const size_t rows = live < sd->Breal ? live : sd->Breal;
    clnode_status st = be->ops->buf_read(be, sd->IS, 0, rows * sizeof(cln_istate), r->is_rows);
    if (st != CLNODE_OK)
        return st;
    size_t lo = 0, hi = rows, np = 0;
    int nts = 0, nsaved = 0; /* the most points written in a swapped row, per kind */
    for (;;) {
        while (lo < hi && !r->is_rows[lo].done)
            ++lo; /* the first frozen row */
        while (hi > lo && r->is_rows[hi - 1].done)
            --hi; /* after the last running row */
        if (hi == lo)
            break;
        const size_t j = hi - 1, t = r->perm[lo];
        for (int q = 0; q < 2; ++q) {
            const cln_istate *is = &r->is_rows[q ? j : lo];
            nts = is->nts > nts ? is->nts : nts;
            nsaved = is->nsteps_saved > nsaved ? is->nsteps_saved : nsaved;
        }
        r->pairs[2 * np] = (int32_t)lo;
        r->pairs[2 * np + 1] = (int32_t)j;
        ++np;
        r->perm[lo] = r->perm[j];
        r->perm[j] = t;
        r->is_rows[lo].done = 0;
        r->is_rows[j].done = 1;
    }
    /* lo: the running trajectories, now rows [0, lo) (the count read at the same wait) */
    CLN_CHECK(r->ctx, lo == active, CLNODE_ERR_INTERNAL,
              "compaction found %zu running trajectories, the count %zu", lo, active);
    if (np) {
        const size_t es = sd->esize, N = sd->N;
        CLN_TRY(st, be->ops->buf_write(be, sd->PAIRS, 0, 2 * np * sizeof(int32_t), r->pairs));
        const size_t ms = r->steps_cap, nt = r->p->n_save_ts;
        cln_row_move moves[4 + CLN_MAX_STAGES + 4];
        size_t nm = 0;
        moves[nm++] = (cln_row_move){sd->Y, 0, N * es, N * es};
        moves[nm++] = (cln_row_move){sd->Z, 0, sd->ldz * es, sd->ldz * es};
        moves[nm++] = (cln_row_move){sd->RS, 0, CLN_RSTATE_REALS * es, CLN_RSTATE_REALS * es};
        moves[nm++] = (cln_row_move){sd->IS, 0, sizeof(cln_istate), sizeof(cln_istate)};
        for (size_t i = 0; i < sd->stages; ++i) /* FSAL methods carry block 0 to the next step */
            moves[nm++] = (cln_row_move){sd->F, i * sd->B * N * es, N * es, N * es};
        /* the saved points: only the part of the rows written so far */
        if (nt)
            moves[nm++] = (cln_row_move){sd->TSOUT, 0, nt * N * es, (size_t)nts * N * es};
        if (nt && r->p->save_ts_per_trajectory) /* each trajectory's own save times */
            moves[nm++] = (cln_row_move){sd->TS, 0, nt * es, nt * es};
        if (r->dev_steps) {
            moves[nm++] = (cln_row_move){sd->STT, 0, ms * es, (size_t)nsaved * es};
            moves[nm++] = (cln_row_move){sd->STY, 0, ms * N * es, (size_t)nsaved * N * es};
        }
        for (size_t k = 0; k < nm; ++k)
            CLN_TRY(st, be->ops->swap_rows(be, sd, moves[k].buf, moves[k].off, moves[k].stride,
                                           moves[k].len, np));
    }
    cln_log(r->ctx, CLNODE_LOG_DEBUG, CLNODE_LOG_GENERAL,
            "compaction: %zu of %zu live rows running, %zu swapped", active, live, np);
    sd->live = (active + align - 1) / align * align;
    ++r->compactions;
fail:
    return st;
}
