/* solver_setup.c - a solve's buffers (allocated once, released at the end) and what it uploads
 * before its first step: each trajectory's state row and the per-solve constants; and the saved
 * steps' rows read back, packed on the device first. */
#include "solver/solver_internal.h"

clnode_status cln_alloc(cln_run *r, cln_buf **out, size_t n_elems, size_t esize)
{
    size_t bytes;
    CLN_CHECK(r->ctx, cln_mul_size(n_elems ? n_elems : 1, esize, &bytes), CLNODE_ERR_OUT_OF_MEMORY,
              "buffer of %zu elements overflows", n_elems);
    return r->be->ops->buf_alloc(r->be, bytes, out);
}

void cln_release(cln_run *r)
{
    cln_solve_dev *sd = &r->sd;
    cln_backend *be = r->be;
    if (r->begun)
        be->ops->solve_end(be, sd);
    for (size_t i = 0; i < CLN_MAX_LAYERS; ++i) {
        be->ops->buf_free(be, sd->W[i]);
        be->ops->buf_free(be, sd->bias[i]);
    }
    cln_buf **all[] = {&sd->Y,     &sd->F,   &sd->Z,   &sd->H[0],  &sd->H[1],
                       &sd->CR,    &sd->CI,  &sd->RS,  &sd->IS,    &sd->TS,
                       &sd->TSOUT, &sd->STT, &sd->STY, &sd->PAIRS, &sd->scale};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        be->ops->buf_free(be, *all[i]);
        *all[i] = NULL;
    }
    free(r->progress_rows);
    r->progress_rows = NULL;
    free(r->perm);
    free(r->is_rows);
    free(r->pairs);
    r->perm = NULL;
    r->is_rows = NULL;
    r->pairs = NULL;
}

/* Each trajectory's problem into its state row (tau0, tau1, clip_floor, dt0 in the state
 * precision; the rest zero, cln_init_traj fills it). Padding rows stay zero. */
void cln_problem_rows(const cln_run *r, cln_rstate_d *rows)
{
    const clnode_solve_options *o = r->o;
    const clnode_precision p = r->sd.prec;
    memset(rows, 0, r->sd.B * sizeof *rows);
    double last_tau1 = 0.0, last_floor = 0.0;
    for (size_t b = 0; b < r->sd.Breal; ++b) {
        cln_rstate_d *rs = &rows[b];
        rs->tau0 = r->dir * cln_round(p, cln_t0(o, r->p, b));
        rs->tau1 = r->dir * cln_round(p, cln_t1(o, r->p, b));
        /* 100 ulp steps: computed again only when the end changes */
        if (b == 0 || rs->tau1 != last_tau1) {
            last_tau1 = rs->tau1;
            last_floor = cln_clip_floor(p, rs->tau1);
        }
        rs->clip_floor = last_floor;
        rs->dt0 = cln_first_step(o, p, cln_dt0_of(o, r->p, b));
    }
}

/* The method's descriptor into the constants: tableau, error weights, dense coefficients. */
static void cln_fill_method(const clnode_method *m, cln_consts_d *K)
{
    const int s = m->stages;
    for (int i = 0; i < s; ++i) {
        for (int j = 0; j < s; ++j)
            K->a[i][j] = m->a[i * s + j];
        K->b[i] = m->b[i];
        K->e[i] = m->b_error ? m->b_error[i] : 0.0;
        K->c[i] = m->c[i];
        for (int d = 0; m->dense && d < CLN_DENSE_COEFFS; ++d)
            K->dense[i][d] = m->dense[i * CLN_DENSE_COEFFS + d];
    }
}

/* The smallest rtol the arithmetic of the solve's (device, precision, GEMM mode) resolves,
 * CLNODE_GUARD_FACTOR u of the context's probe, or 0 when it was not probed (the guard off,
 * constant steps). The rounding-floor detector runs only below it: above it, an error estimate
 * that does not fall as the step shrinks is truncation error (a kink of relu, a discontinuity),
 * which the controller resolves with smaller steps, as diffrax's does, never rounding noise. */
static double cln_guard_bound(const clnode_context *ctx, const clnode_solve_options *o)
{
    const clnode_probe_result *pr = cln_probe_peek(ctx, o->precision, o->gemm_precision);
    return pr ? CLNODE_GUARD_FACTOR * pr->unit_roundoff : 0.0;
}

/* Per-solve constants, the reals in double (rounded to the state precision on upload). */
void cln_fill_constants(const cln_run *r, cln_consts_d *K, cln_iconsts *KI)
{
    const clnode_solve_options *o = r->o;
    const clnode_method *m = r->m;
    const cln_solve_dev *sd = &r->sd;
    memset(K, 0, sizeof *K);
    memset(KI, 0, sizeof *KI);
    const double eo = (double)m->error_order;
    K->dir = r->dir;
    K->sqrt_n = sqrt((double)sd->N);
    /* the table's KERNEL options, by name into cln_consts */
#define CLN_CONST_KERNEL(name) K->name = o->name;
#define CLN_CONST_HOST(name)
#define CLN_X_CONST(ctype, name, type, where, def, min, max, flags, doc) CLN_CONST_##where(name)
    CLNODE_SOLVE_OPTION_LIST(CLN_X_CONST)
#undef CLN_X_CONST
#undef CLN_CONST_HOST
#undef CLN_CONST_KERNEL
    K->coeff1 = (o->icoeff + o->pcoeff + o->dcoeff) / eo;
    K->coeff2 = -(o->pcoeff + 2.0 * o->dcoeff) / eo;
    K->coeff3 = o->dcoeff / eo;
    cln_fill_method(m, K);
    KI->B = (int32_t)sd->B;
    KI->Breal = (int32_t)sd->Breal;
    KI->N = (int32_t)sd->N;
    KI->ldz = (int32_t)sd->ldz;
    KI->stages = m->stages;
    KI->fsal = m->fsal;
    KI->ssal = m->ssal;
    KI->adaptive = !o->constant_step;
    KI->dense_form = (int32_t)m->interpolation;
    KI->max_steps = (int32_t)o->max_steps;
    KI->has_dtmin = !o->constant_step && o->dtmin > 0.0;
    KI->has_dtmax = !o->constant_step && o->dtmax > 0.0;
    KI->force_dtmin = o->force_dtmin != 0;
    KI->save_steps = r->dev_steps;
    KI->steps_cap = (int32_t)r->steps_cap;
    KI->n_ts = (int32_t)r->p->n_save_ts;
    KI->ts_stride = r->p->save_ts_per_trajectory ? KI->n_ts : 0;
    KI->coeff1_zero = K->coeff1 == 0.0;
    KI->coeff2_zero = K->coeff2 == 0.0;
    KI->coeff3_zero = K->coeff3 == 0.0;
    KI->dt0_order = m->order > 0 ? m->order : 1;
    KI->time_input = r->model->time_input;
    KI->floor_detect = !o->constant_step && o->precision_guard != CLNODE_GUARD_OFF &&
                       o->rtol < cln_guard_bound(r->ctx, o);
}

/* The first `cap` points of every row of a saved-steps buffer (rows of r->steps_cap points of
 * `width` elements) into dst (B x cap x width doubles), in device row order: where the device rows
 * are longer, they are packed first on the device into a buffer of that size (copy_rows), so that
 * what is read back grows with the longest trajectory's points, not with the capacity the solve
 * grew to. */
clnode_status cln_download_rows(cln_run *r, cln_buf *src, size_t width, size_t cap, double *dst)
{
    cln_backend *be = r->be;
    cln_solve_dev *sd = &r->sd;
    const size_t B = sd->Breal, es = sd->esize;
    if (!cap)
        return CLNODE_OK;
    if (cap == r->steps_cap)
        return cln_download(be, sd, src, 0, dst, B * cap * width);
    cln_buf *packed = NULL;
    clnode_status st = CLNODE_OK;
    CLN_TRY(st, cln_alloc(r, &packed, B * cap * width, es));
    CLN_TRY(st, be->ops->copy_rows(be, packed, 0, cap * width * es, src, 0,
                                   r->steps_cap * width * es, cap * width * es, B));
    CLN_TRY(st, cln_download(be, sd, packed, 0, dst, B * cap * width));
fail:
    be->ops->buf_free(be, packed);
    return st;
}
