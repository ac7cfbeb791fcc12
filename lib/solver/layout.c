/* layout.c - diffrax's layout of the saved points (clnode/solver.h): the slots of every
 * trajectory, how many of them a trajectory fills, and its rows of times and states. */
#include <math.h>
#include <stdint.h>

#include "core/fpenv.h"
#include "core/internal.h"
#include "solver/options.h"
#include "solver/solution.h"

clnode_status clnode_save_slots(clnode_context *ctx, const clnode_solve_options *opts,
                                const clnode_problem *problem, size_t *slots)
{
    cln_clear_error(ctx);
    CLN_CHECK(ctx, opts && slots, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_save_slots: opts and slots must not be NULL");
    clnode_solve_options o;
    const clnode_status st = cln_solve_options_import(ctx, opts, &o);
    if (st != CLNODE_OK)
        return st;
    CLN_CHECK(ctx, o.max_steps >= 1 && o.max_steps <= CLNODE_MAX_STEPS_LIMIT,
              CLNODE_ERR_INVALID_ARGUMENT, "max_steps must be in [1, %ld] (got %ld)",
              (long)CLNODE_MAX_STEPS_LIMIT, o.max_steps);
    clnode_problem p;
    clnode_problem_default(&p);
    if (problem) {
        const clnode_status pst = cln_problem_import(ctx, problem, &p);
        if (pst != CLNODE_OK)
            return pst;
    }
    const size_t nts = p.n_save_ts; /* the save times of every trajectory */
    CLN_CHECK(ctx, nts == 0 || p.save_ts, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_problem.save_ts is NULL but n_save_ts is %zu", nts);
    const size_t ends = (size_t)(o.save_t0 != 0) + (size_t)(o.save_t1 != 0 && !o.save_steps);
    size_t t;
    CLN_CHECK(ctx,
              cln_add_size(ends, nts, &t) &&
                  cln_add_size(t, o.save_steps ? (size_t)o.max_steps : 0, &t),
              CLNODE_ERR_INVALID_ARGUMENT, "the saved points overflow: %zu save times", nts);
    *slots = t;
    return CLNODE_OK;
}

/* The saved steps and the final point exclude each other: with steps saved, the last step is the
 * point where the trajectory stopped (diffrax's _save_t1 saves t1 only without steps). */
static int cln_layout_has_t1(const clnode_solution *s)
{
    return s->count[CLNODE_SAVE_T1] && !s->count[CLNODE_SAVE_STEPS];
}

size_t clnode_solution_points(const clnode_solution *s, size_t traj)
{
    if (!s || traj >= s->B)
        return 0;
    size_t n = 0;
    for (int k = CLNODE_SAVE_T0; k <= CLNODE_SAVE_STEPS; ++k)
        n += s->count[k] ? s->count[k][traj] : 0;
    return n + (cln_layout_has_t1(s) ? s->count[CLNODE_SAVE_T1][traj] : 0);
}

clnode_status clnode_solution_ts_index(const clnode_solution *s, size_t traj, size_t *first)
{
    if (!s || !first || traj >= s->B)
        return CLNODE_ERR_INVALID_ARGUMENT;
    *first = s->first_ts ? s->first_ts[traj] : 0;
    return CLNODE_OK;
}

/* Where rows are written: times and states as float or double, NULL to skip. */
typedef struct cln_rows_out {
    void *ts, *ys;
    clnode_save_kind *kinds; /* NULL: not asked for */
    int f32;
} cln_rows_out;

/* Value i of a (float or double) array, converted from the stored double as a C cast does. */
static void cln_put(void *a, size_t i, double x, int f32)
{
    if (f32)
        ((float *)a)[i] = (float)x;
    else
        ((double *)a)[i] = x;
}

/* Slot `slot` (index into the output's rows) holds (t, y), a point of kind `kind`. */
static void cln_put_point(const cln_rows_out *out, size_t slot, size_t N, clnode_save_kind kind,
                          double t, const double *y)
{
    if (out->kinds)
        out->kinds[slot] = kind;
    if (out->ts)
        cln_put(out->ts, slot, t, out->f32);
    for (size_t j = 0; out->ys && j < N; ++j)
        cln_put(out->ys, slot * N + j, y[j], out->f32);
}

/* Trajectory b's row, starting at slot `at` of the output: its points in the layout's order,
 * then padding up to `slots`. */
static void cln_layout_row(const clnode_solution *s, size_t b, size_t slots, size_t at,
                           const cln_rows_out *out)
{
    const size_t N = s->N;
    size_t k = 0, n, na = 0, nb = 0;
    const double *t, *y, *ta = NULL, *ya = NULL, *tb = NULL, *yb = NULL;
    if (clnode_solution_saved(s, b, CLNODE_SAVE_T0, &n, &t, &y) == CLNODE_OK && n)
        cln_put_point(out, at + k++, N, CLNODE_SAVE_T0, t[0], y);
    clnode_solution_saved(s, b, CLNODE_SAVE_TS, &na, &ta, &ya);
    clnode_solution_saved(s, b, CLNODE_SAVE_STEPS, &nb, &tb, &yb);
    /* merged in the direction of integration; at equal times the save time first */
    for (size_t ia = 0, ib = 0; ia < na || ib < nb; ++k) {
        if (ib >= nb || (ia < na && s->dir * ta[ia] <= s->dir * tb[ib])) {
            cln_put_point(out, at + k, N, CLNODE_SAVE_TS, ta[ia], ya ? ya + ia * N : NULL);
            ++ia;
        } else {
            cln_put_point(out, at + k, N, CLNODE_SAVE_STEPS, tb[ib], yb ? yb + ib * N : NULL);
            ++ib;
        }
    }
    if (cln_layout_has_t1(s) &&
        clnode_solution_saved(s, b, CLNODE_SAVE_T1, &n, &t, &y) == CLNODE_OK && n)
        cln_put_point(out, at + k++, N, CLNODE_SAVE_T1, t[0], y);
    for (; k < slots && (out->ts || out->ys); ++k) {
        if (out->ts)
            cln_put(out->ts, at + k, INFINITY, out->f32);
        for (size_t j = 0; out->ys && j < N; ++j)
            cln_put(out->ys, (at + k) * N + j, INFINITY, out->f32);
    }
}

static clnode_status cln_solution_rows(const clnode_solution *s, size_t first, size_t count,
                                       size_t slots, const cln_rows_out *out)
{
    size_t values;
    if (!s || first > s->B || count > s->B - first || !cln_mul_size(count, slots, &values) ||
        !cln_mul_size(values, s->N, &values))
        return CLNODE_ERR_INVALID_ARGUMENT;
    for (size_t b = first; b < first + count; ++b)
        if (clnode_solution_points(s, b) > slots)
            return CLNODE_ERR_INVALID_ARGUMENT;
    if (out->ys && !s->y_final) /* an imported tape: no saved values (clnode/gradient.h) */
        return CLNODE_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < count; ++i)
        cln_layout_row(s, first + i, slots, i * slots, out);
    return CLNODE_OK;
}

clnode_status clnode_solution_rows_f64(const clnode_solution *sol, size_t first, size_t count,
                                       size_t slots, double *ts, double *ys)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    const cln_rows_out out = {ts, ys, NULL, 0};
    return cln_solution_rows(sol, first, count, slots, &out);
}

clnode_status clnode_solution_rows_f32(const clnode_solution *sol, size_t first, size_t count,
                                       size_t slots, float *ts, float *ys)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    const cln_rows_out out = {ts, ys, NULL, 1};
    return cln_solution_rows(sol, first, count, slots, &out);
}

clnode_status clnode_solution_kinds(const clnode_solution *sol, size_t traj, size_t slots,
                                    clnode_save_kind *kinds)
{
    if (!kinds)
        return CLNODE_ERR_INVALID_ARGUMENT;
    const cln_rows_out out = {NULL, NULL, kinds, 0};
    return cln_solution_rows(sol, traj, 1, slots, &out);
}
