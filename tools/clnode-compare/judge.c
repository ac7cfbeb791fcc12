/* judge.c - clnode-compare's verdicts: each row against the reference, by the tolerance and
 * by the problem's own sensitivity to rounding (compare.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compare.h"

/* Largest relative deviation of one saved kind of trajectory i from the reference's trajectory
 * i mod R; +inf when points are missing or not finite. */
static double kind_dev(const compare *c, const clnode_solution *s, size_t i, clnode_save_kind k)
{
    size_t n = 0, nr = 0;
    const double *ts, *ys, *tr, *yr;
    clnode_solution_saved(s, i, k, &n, &ts, &ys);
    clnode_solution_saved(c->ref, i % c->R, k, &nr, &tr, &yr);
    if (n != nr)
        return INFINITY;
    const double floor_abs = c->pb.opts.atol / c->pb.opts.rtol;
    double dev = 0;
    for (size_t p = 0; p < n; ++p) {
        double num = 0, den = 0;
        for (size_t j = 0; j < c->N; ++j) {
            const double d = fabs(ys[p * c->N + j] - yr[p * c->N + j]);
            if (!(d <= num))
                num = isnan(d) ? INFINITY : d;
            den = fmax(den, fabs(yr[p * c->N + j]));
        }
        const double rel = num / (den + floor_abs);
        if (!(rel <= dev))
            dev = rel;
    }
    return dev;
}

static int same_saved(const clnode_solution *a, const clnode_solution *b, size_t i, size_t N)
{
    for (int k = CLNODE_SAVE_T0; k <= CLNODE_SAVE_T1; ++k) {
        size_t na = 0, nb = 0;
        const double *ta, *ya, *tb, *yb;
        clnode_solution_saved(a, i, (clnode_save_kind)k, &na, &ta, &ya);
        clnode_solution_saved(b, i, (clnode_save_kind)k, &nb, &tb, &yb);
        if (na != nb || (na && (memcmp(ta, tb, na * sizeof *ta) != 0 ||
                                memcmp(ya, yb, na * N * sizeof *ya) != 0)))
            return 0;
    }
    return 1;
}

double compare_row_tolerance(const compare *c, clnode_precision p)
{
    if (c->tolerance > 0)
        return c->tolerance;
    const double u = p == CLNODE_FP64 ? ldexp(1.0, -53) : ldexp(1.0, -24);
    return 100.0 * fmax(c->pb.opts.rtol, 16.0 * u);
}

/* The row against the problem's own sensitivity to rounding: the largest deviation of any of its
 * trajectories from the baseline's reference, its step range and success. A strict row that
 * disagrees by the tolerance rule but lies within the baseline is not failed: the problem, not the
 * device, moves that much under rounding. */
static void judge_sensitivity(compare *c, row *r)
{
    const clnode_sensitivity *b = c->base[r->prec == CLNODE_FP64];
    if (!b)
        return;
    double dev = 0;
    long lo = -1, hi = -1;
    int success = 1, all_complete = 1;
    for (size_t k = 0; k < c->nb; ++k) {
        if (r->status[k] != CLNODE_OK)
            return;
        const clnode_solution *s = r->sol[k];
        for (size_t i = 0; i < clnode_solution_batch(s); ++i) {
            double d = INFINITY;
            int complete; /* a trajectory that ended early: the deviation as far as it ran */
            clnode_sensitivity_deviation(b, s, i, i % c->R, &d, &complete);
            all_complete &= complete;
            if (!(d <= dev))
                dev = d;
            clnode_trajectory_stats st;
            clnode_solution_stats(s, i, &st);
            if (lo < 0 || st.num_steps < lo)
                lo = st.num_steps;
            if (st.num_steps > hi)
                hi = st.num_steps;
            success &= st.result == CLNODE_RESULT_SUCCESS;
        }
    }
    r->base_dev = dev;
    if (clnode_sensitivity_judge(b, CLNODE_SENSITIVITY_ALL, dev, lo, hi, success, &r->sj) !=
        CLNODE_OK)
        return;
    r->judged = 1;
    /* the certificate's rule (clnode-solve --certify) applied to every trajectory of the row */
    r->certified =
        all_complete && (r->sj.verdict != CLNODE_VERDICT_BEYOND || dev <= c->pb.opts.rtol);
    /* an explicit --tolerance stays the rule: the verdict is reported but exempts nothing */
    if (r->fails && r->sj.verdict != CLNODE_VERDICT_BEYOND && !(c->tolerance > 0)) {
        r->fails = 0;
        snprintf(r->verdict, sizeof r->verdict, "%s",
                 r->sj.verdict == CLNODE_VERDICT_ILL_CONDITIONED
                     ? "not blamed: the problem is ill-conditioned"
                     : "differs, within the problem's own sensitivity");
    }
}

static void judge_tolerance(compare *c, row *r);

void compare_judge(compare *c, row *r)
{
    judge_tolerance(c, r);
    judge_sensitivity(c, r);
}

static void judge_tolerance(compare *c, row *r)
{
    const row *host = NULL;
    for (size_t i = 0; i < c->nrows; ++i)
        if (strcmp(c->rows[i].spec, "host") == 0 && c->rows[i].prec == r->prec &&
            c->rows[i].mode == r->mode)
            host = &c->rows[i];
    r->is_reference =
        strcmp(r->spec, "host") == 0 && r->prec == CLNODE_FP64 && r->mode == CLNODE_GEMM_STRICT;
    r->batch_invariant = 1;
    r->all_success = 1;
    r->bit_identical = host && host != r ? 1 : -1;
    r->max_dev = 0;
    const char *err = NULL;
    long first_steps[64] = {0};
    size_t nres[5] = {0};
    for (size_t b = 0; b < c->nb; ++b) {
        r->steps_min[b] = -1;
        r->steps_max[b] = -1;
        if (r->status[b] != CLNODE_OK) {
            err = r->error[b];
            r->bit_identical = 0;
            continue;
        }
        const clnode_solution *s = r->sol[b];
        const size_t B = clnode_solution_batch(s);
        for (size_t i = 0; i < B; ++i) {
            clnode_trajectory_stats st, rs;
            clnode_solution_stats(s, i, &st);
            clnode_solution_stats(c->ref, i % c->R, &rs);
            if ((unsigned)st.result < 5)
                nres[st.result]++;
            r->all_success &= st.result == CLNODE_RESULT_SUCCESS;
            if (r->steps_min[b] < 0 || st.num_steps < r->steps_min[b])
                r->steps_min[b] = st.num_steps;
            if (st.num_steps > r->steps_max[b])
                r->steps_max[b] = st.num_steps;
            const size_t base = i % c->R;
            if (base < 64) {
                if (b == 0 && i < c->R)
                    first_steps[base] = st.num_steps;
                else if (first_steps[base] != st.num_steps)
                    r->batch_invariant = 0;
            }
            if (st.num_steps > 2 * rs.num_steps && st.num_steps > rs.num_steps + 5)
                r->inflated = 1;
            const double d =
                fmax(kind_dev(c, s, i, CLNODE_SAVE_TS), kind_dev(c, s, i, CLNODE_SAVE_T1));
            if (!(d <= r->max_dev))
                r->max_dev = d;
            if (r->bit_identical == 1) {
                clnode_trajectory_stats hs;
                if (!host->sol[b] || clnode_solution_stats(host->sol[b], i, &hs) != CLNODE_OK ||
                    hs.num_steps != st.num_steps || hs.num_accepted != st.num_accepted ||
                    !same_saved(s, host->sol[b], i, c->N))
                    r->bit_identical = 0;
            }
        }
    }
    r->results[0] = '\0';
    for (int k = 0; k < 5; ++k) {
        if (!nres[k])
            continue;
        const size_t used = strlen(r->results);
        snprintf(r->results + used, sizeof r->results - used, "%s%s x%zu", used ? ", " : "",
                 clnode_result_name((clnode_result)k), nres[k]);
    }
    const double tol = compare_row_tolerance(c, r->prec);
    const int strict = r->mode == CLNODE_GEMM_STRICT;
    const char *tag = strict ? "" : ": tf32 (expected)";
    if (err) {
        snprintf(r->verdict, sizeof r->verdict, "ERROR%s (%.100s)", tag, err);
        r->fails = strict;
        return;
    }
    if (!r->all_success) {
        snprintf(r->verdict, sizeof r->verdict, "%s%s", strict ? "FAILED: " : "",
                 nres[CLNODE_RESULT_PRECISION_FLOOR] ? "precision_floor"
                                                     : "not every trajectory "
                                                       "succeeded");
        if (!strict)
            snprintf(r->verdict + strlen(r->verdict), sizeof r->verdict - strlen(r->verdict), "%s",
                     tag);
        r->fails = strict;
        return;
    }
    if (r->inflated) {
        snprintf(r->verdict, sizeof r->verdict, "%sinflated steps%s", strict ? "DISAGREES: " : "",
                 tag);
        r->fails = strict;
        return;
    }
    if (!(r->max_dev <= tol)) {
        snprintf(r->verdict, sizeof r->verdict, "%s%s", strict ? "DISAGREES" : "DIFFERS", tag);
        r->fails = strict;
        return;
    }
    const char *suffix = r->batch_invariant ? "" : "; steps vary with the batch";
    if (r->is_reference)
        snprintf(r->verdict, sizeof r->verdict, "reference%s", suffix);
    else if (r->bit_identical == 1)
        snprintf(r->verdict, sizeof r->verdict, "agrees (same steps, bit-identical to host)%s",
                 suffix);
    else if (r->max_dev <= 0.1 * tol)
        snprintf(r->verdict, sizeof r->verdict, "agrees%s", suffix);
    else
        snprintf(r->verdict, sizeof r->verdict, "differs within tolerance%s", suffix);
}

const char *compare_probe_class(const row *r)
{
    return r->probe_status == CLNODE_OK ? clnode_gemm_class_name(r->probe.gemm_class) : "?";
}
