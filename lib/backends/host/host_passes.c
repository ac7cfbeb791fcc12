/* host_passes.c - the host backend's passes over the batch: bias and activation, the output
 * scale, the solver's passes of cl/cln_step.h (init, dt0, stage, finish), the fused stage and
 * vector field, and whole steps; each pass's rows shared between the pool's threads when it has
 * work enough. */
#include "backends/host/host_internal.h"

/* Bias + activation on an m x n block, its rows shared between the pool's threads. */
typedef struct host_act_job {
    cln_gemm_isa isa;
    int f64;
    void *C;
    size_t ldc, m, n;
    const void *bias;
    int act;
    const void *scale; /* non-NULL: the output scale pass (scale_n values) instead */
    size_t scale_n;
} host_act_job;

static void host_act_part(void *arg, size_t part, size_t parts)
{
    const host_act_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->m, part, parts, &r0, &r1);
    if (j->scale && j->f64)
        cln_host_out_scale_f64(j->isa, (double *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n,
                               j->scale, j->scale_n);
    else if (j->scale)
        cln_host_out_scale_f32(j->isa, (float *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n, j->scale,
                               j->scale_n);
    else if (j->f64)
        cln_host_bias_act_f64(j->isa, (double *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n, j->bias,
                              j->act);
    else
        cln_host_bias_act_f32(j->isa, (float *)j->C + r0 * j->ldc, j->ldc, r1 - r0, j->n, j->bias,
                              j->act);
}

clnode_status host_bias_act(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                            size_t ldc, size_t m, size_t n, cln_buf *bias, int act)
{
    host_backend *hb = (host_backend *)be;
    const int f64 = sd->prec == CLNODE_FP64;
    host_act_job j = {.isa = hb->isa,
                      .f64 = f64,
                      .C = f64 ? (void *)HOST_F64(C, c_off) : (void *)HOST_F32(C, c_off),
                      .ldc = ldc,
                      .m = m,
                      .n = n,
                      .bias = bias ? (const void *)bias->p : NULL,
                      .act = act};
    cln_pool_run(hb->pool, cln_pool_parts(hb->pool, m, n, CLN_HOST_PART_ELEMS, CLN_HOST_PART_ROWS),
                 host_act_part, &j);
    return CLNODE_OK;
}

clnode_status host_out_scale(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                             size_t ldc, size_t m, size_t n)
{
    host_backend *hb = (host_backend *)be;
    const int f64 = sd->prec == CLNODE_FP64;
    host_act_job j = {.isa = hb->isa,
                      .f64 = f64,
                      .C = f64 ? (void *)HOST_F64(C, c_off) : (void *)HOST_F32(C, c_off),
                      .ldc = ldc,
                      .m = m,
                      .n = n,
                      .scale = sd->scale->p,
                      .scale_n = sd->scale_n};
    cln_pool_run(hb->pool, cln_pool_parts(hb->pool, m, n, CLN_HOST_PART_ELEMS, CLN_HOST_PART_ROWS),
                 host_act_part, &j);
    return CLNODE_OK;
}

clnode_status host_nonfinite_rows(cln_backend *be, clnode_precision prec, cln_buf *X, size_t off,
                                  size_t ld, size_t cols, size_t rows, cln_buf *FLAG)
{
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    CLN_CHECK(be->ctx,
              cols <= ld && (rows == 0 || (off + (rows - 1) * ld + cols) * es <= X->size) &&
                  rows * sizeof(int64_t) <= FLAG->size,
              CLNODE_ERR_INTERNAL, "nonfinite_rows of %zu rows of %zu values out of range", rows,
              cols);
    int64_t *flag = (int64_t *)(void *)FLAG->p;
    if (prec == CLNODE_FP32)
        cln_host_nonfinite_f32(rows, cols, ld, off, (const float *)(const void *)X->p, flag);
    else
        cln_host_nonfinite_f64(rows, cols, ld, off, (const double *)(const void *)X->p, flag);
    return CLNODE_OK;
}

clnode_status host_bad_save_ts(cln_backend *be, clnode_precision prec, cln_buf *TS, size_t ld,
                               size_t cols, size_t rows, cln_buf *RS, int within, cln_buf *FLAG)
{
    const size_t es = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    const size_t rs_row = sizeof(CLN_RSTATE_STRUCT(double)) / sizeof(double) * es;
    CLN_CHECK(be->ctx,
              (ld == 0 || cols <= ld) && (rows == 0 || ((rows - 1) * ld + cols) * es <= TS->size) &&
                  rows * rs_row <= RS->size && rows * sizeof(int64_t) <= FLAG->size,
              CLNODE_ERR_INTERNAL, "bad_save_ts of %zu rows of %zu save times out of range", rows,
              cols);
    int64_t *flag = (int64_t *)(void *)FLAG->p;
    if (prec == CLNODE_FP32)
        cln_host_bad_save_ts_f32(rows, cols, ld, within, (const float *)(const void *)TS->p,
                                 (const float *)(const void *)RS->p, flag);
    else
        cln_host_bad_save_ts_f64(rows, cols, ld, within, (const double *)(const void *)TS->p,
                                 (const double *)(const void *)RS->p, flag);
    return CLNODE_OK;
}

clnode_status host_init(cln_backend *be, cln_solve_dev *sd)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_init_f32(sd->B, HOST_F32(sd->CR, 0), HOST_I32(sd->CI), HOST_F32(sd->RS, 0),
                          HOST_I32(sd->IS));
    else
        cln_host_init_f64(sd->B, HOST_F64(sd->CR, 0), HOST_I32(sd->CI), HOST_F64(sd->RS, 0),
                          HOST_I32(sd->IS));
    return CLNODE_OK;
}

clnode_status host_dt0(cln_backend *be, cln_solve_dev *sd, int phase)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_dt0_f32(phase, sd->live, HOST_F32(sd->CR, 0), HOST_I32(sd->CI),
                         HOST_F32(sd->RS, 0), HOST_I32(sd->IS), HOST_F32(sd->Y, 0),
                         HOST_F32(sd->F, 0), HOST_F32(sd->Z, 0));
    else
        cln_host_dt0_f64(phase, sd->live, HOST_F64(sd->CR, 0), HOST_I32(sd->CI),
                         HOST_F64(sd->RS, 0), HOST_I32(sd->IS), HOST_F64(sd->Y, 0),
                         HOST_F64(sd->F, 0), HOST_F64(sd->Z, 0));
    return CLNODE_OK;
}

clnode_status host_stage(cln_backend *be, cln_solve_dev *sd, int i)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_stage_f32(i, sd->live, HOST_F32(sd->CR, 0), HOST_I32(sd->CI), HOST_F32(sd->RS, 0),
                           HOST_I32(sd->IS), HOST_F32(sd->Y, 0), HOST_F32(sd->F, 0),
                           HOST_F32(sd->Z, 0));
    else
        cln_host_stage_f64(i, sd->live, HOST_F64(sd->CR, 0), HOST_I32(sd->CI), HOST_F64(sd->RS, 0),
                           HOST_I32(sd->IS), HOST_F64(sd->Y, 0), HOST_F64(sd->F, 0),
                           HOST_F64(sd->Z, 0));
    return CLNODE_OK;
}

/* Stage i and the MLP on it (i < 0: the MLP alone) for rows [r0, r1), with thread part `part`'s
 * activation scratch. */
static void host_stage_mlp_rows(const host_backend *hb, cln_solve_dev *sd, size_t part, int i,
                                int flip, size_t r0, size_t r1)
{
    host_solve *hs = sd->be_data;
    if (sd->prec == CLNODE_FP32)
        cln_host_stage_mlp_f32(hb->isa, i, flip, r0, r1, &hs->mlp, HOST_F32(sd->CR, 0),
                               HOST_I32(sd->CI), HOST_F32(sd->RS, 0), HOST_I32(sd->IS),
                               HOST_F32(sd->Y, 0), HOST_F32(sd->F, 0), HOST_F32(sd->Z, 0),
                               (float *)hs->H + part * hs->h_elems);
    else
        cln_host_stage_mlp_f64(hb->isa, i, flip, r0, r1, &hs->mlp, HOST_F64(sd->CR, 0),
                               HOST_I32(sd->CI), HOST_F64(sd->RS, 0), HOST_I32(sd->IS),
                               HOST_F64(sd->Y, 0), HOST_F64(sd->F, 0), HOST_F64(sd->Z, 0),
                               (double *)hs->H + part * hs->h_elems);
}

/* One part of the fused pass: its rows of stage i and the MLP on them. */
typedef struct host_fused_job {
    const host_backend *hb;
    cln_solve_dev *sd;
    int i, flip;
} host_fused_job;

static void host_fused_part(void *arg, size_t part, size_t parts)
{
    const host_fused_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->sd->live, part, parts, &r0, &r1);
    host_stage_mlp_rows(j->hb, j->sd, part, j->i, j->flip, r0, r1);
}

/* The fused pass over the live rows (i < 0: the MLP alone, see host_mlp.h), its rows shared
 * between the pool's threads when there are enough of them. */
static void host_fused_run(host_backend *hb, cln_solve_dev *sd, host_solve *hs, int i)
{
    host_fused_job j = {.hb = hb, .sd = sd, .i = i, .flip = (int)(hs->evals++ & 1)};
    cln_pool_run(hb->pool,
                 cln_pool_parts(hb->pool, sd->live, hs->fmas_per_row, CLN_HOST_PART_FMAS,
                                CLN_HOST_FUSED_PART_ROWS),
                 host_fused_part, &j);
}

/* Stage i, then F block i = MLP(Z): one fused pass where the solve has one (host_fused_begin),
 * else the stage pass and one GEMM and bias + activation pass per layer, as the driver would. */
clnode_status host_stage_rhs(cln_backend *be, cln_solve_dev *sd, int i)
{
    host_backend *hb = (host_backend *)be;
    host_solve *hs = sd->be_data;
    if (hs) {
        host_fused_run(hb, sd, hs, i);
        return CLNODE_OK;
    }
    const clnode_status st = host_stage(be, sd, i);
    return st == CLNODE_OK ? cln_mlp_layers(be, sd, i, 0) : st;
}

/* F block 0 = MLP(Z) through the fused pass's kernels, without the stage (the benchmarks' bare
 * vector field, the automatic first step's probe); where the solve has no fused pass, one GEMM
 * and bias + activation pass per layer, as host_stage_rhs. */
clnode_status host_rhs(cln_backend *be, cln_solve_dev *sd)
{
    host_solve *hs = sd->be_data;
    if (!hs)
        return cln_mlp_layers(be, sd, 0, 0);
    host_fused_run((host_backend *)be, sd, hs, -1);
    return CLNODE_OK;
}

/* cln_finish_traj for rows [r0, r1) (every trajectory's is its own). */
static void host_finish_rows(const host_backend *hb, cln_solve_dev *sd, size_t r0, size_t r1)
{
    if (sd->prec == CLNODE_FP32)
        cln_host_finish_rows_f32(hb->isa, r0, r1, HOST_F32(sd->CR, 0), HOST_I32(sd->CI),
                                 HOST_F32(sd->RS, 0), HOST_I32(sd->IS), HOST_F32(sd->Y, 0),
                                 HOST_F32(sd->F, 0), HOST_F32(sd->Z, 0), HOST_F32(sd->TS, 0),
                                 HOST_F32(sd->TSOUT, 0), HOST_F32(sd->STT, 0),
                                 HOST_F32(sd->STY, 0));
    else
        cln_host_finish_rows_f64(hb->isa, r0, r1, HOST_F64(sd->CR, 0), HOST_I32(sd->CI),
                                 HOST_F64(sd->RS, 0), HOST_I32(sd->IS), HOST_F64(sd->Y, 0),
                                 HOST_F64(sd->F, 0), HOST_F64(sd->Z, 0), HOST_F64(sd->TS, 0),
                                 HOST_F64(sd->TSOUT, 0), HOST_F64(sd->STT, 0),
                                 HOST_F64(sd->STY, 0));
}

/* One part of the step's finish. */
typedef struct host_finish_job {
    const host_backend *hb;
    cln_solve_dev *sd;
} host_finish_job;

static void host_finish_part(void *arg, size_t part, size_t parts)
{
    const host_finish_job *j = arg;
    size_t r0, r1;
    host_part_rows(j->sd->live, part, parts, &r0, &r1);
    host_finish_rows(j->hb, j->sd, r0, r1);
}

/* The finish of every live row, the rows shared between the pool's threads when there are enough
 * of them (a trajectory's error norm and controller cost some hundred operations per component
 * and stage). */
clnode_status host_finish(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    const size_t work = sd->N * (sd->stages ? sd->stages : 1) * 8;
    host_finish_job j = {hb, sd};
    cln_pool_run(hb->pool,
                 cln_pool_parts(hb->pool, sd->live, work, CLN_HOST_PART_ELEMS, CLN_HOST_PART_ROWS),
                 host_finish_part, &j);
    return CLNODE_OK;
}

/* n whole steps, row block by row block: each part takes its rows CLN_HOST_MLP_ROWS at a time
 * through every stage and the finish of a step, n times, before the next block. A block's Y, F
 * and Z (the seed model's: 24 rows x 90 values) stay in L1 from stage to stage, where a pass of
 * one stage over the whole batch would find the earlier stages' F in L3 or memory (B = 4096:
 * 1.1 MB of fp32 F), and the pool wakes its threads once per call instead of once per stage.
 * The blocks are claimed, not assigned: a part takes its own rows' blocks in order, then those
 * the other parts have not taken yet, so a thread whose core is slower (another process on it,
 * or a virtual CPU the hypervisor lends elsewhere) does less of the step instead of holding back
 * the others. Every row's arithmetic is the one the stage-by-stage order does (rows are
 * independent), whichever thread does it, so the bits are the same. */
typedef struct host_steps_job {
    const host_backend *hb;
    cln_solve_dev *sd;
    long n;
    unsigned long evals; /* the first evaluation's number (its panel order, see host_mlp.h) */
} host_steps_job;

static void host_steps_block(const host_steps_job *j, size_t part, size_t c0, size_t c1)
{
    cln_solve_dev *sd = j->sd;
    unsigned long e = j->evals;
    for (long s = 0; s < j->n; ++s) {
        for (size_t i = sd->first_stage; i < sd->stages; ++i, ++e)
            host_stage_mlp_rows(j->hb, sd, part, (int)i, (int)(e & 1), c0, c1);
        host_finish_rows(j->hb, sd, c0, c1);
    }
}

static void host_steps_part(void *arg, size_t part, size_t parts)
{
    const host_steps_job *j = arg;
    for (size_t q = 0; q < parts; ++q) {
        const size_t owner = (part + q) % parts; /* its own rows first */
        size_t r0, r1;
        host_part_rows(j->sd->live, owner, parts, &r0, &r1);
        atomic_size_t *next = &j->hb->claims[owner].next;
        for (;;) {
            const size_t c0 =
                r0 + atomic_fetch_add_explicit(next, CLN_HOST_MLP_ROWS, memory_order_relaxed);
            if (c0 >= r1)
                break;
            host_steps_block(j, part, c0,
                             r1 - c0 > CLN_HOST_MLP_ROWS ? c0 + CLN_HOST_MLP_ROWS : r1);
        }
    }
}

clnode_status host_steps(cln_backend *be, cln_solve_dev *sd, long n)
{
    host_backend *hb = (host_backend *)be;
    host_solve *hs = sd->be_data;
    if (!hs) { /* no fused pass (OpenBLAS, TF32): stage by stage, as the driver would */
        clnode_status st = CLNODE_OK;
        for (long s = 0; s < n && st == CLNODE_OK; ++s) {
            for (size_t i = sd->first_stage; i < sd->stages && st == CLNODE_OK; ++i)
                st = host_stage_rhs(be, sd, (int)i);
            if (st == CLNODE_OK)
                st = host_finish(be, sd);
        }
        return st;
    }
    const size_t per_step = sd->stages - sd->first_stage;
    host_steps_job j = {.hb = hb, .sd = sd, .n = n, .evals = hs->evals};
    hs->evals += (unsigned long)n * per_step;
    size_t work = hs->fmas_per_row;
    work = work * per_step * (size_t)n; /* a few million at most: steps are few per call */
    const size_t parts =
        cln_pool_parts(hb->pool, sd->live, work, CLN_HOST_PART_FMAS, CLN_HOST_FUSED_PART_ROWS);
    for (size_t p = 0; p < parts; ++p) /* published to the workers with the job */
        atomic_store_explicit(&hb->claims[p].next, 0, memory_order_relaxed);
    cln_pool_run(hb->pool, parts, host_steps_part, &j);
    return CLNODE_OK;
}
