/* lib/backends/host/: the host CPU backend: the ordered GEMM (AVX-512, AVX2, portable) or
 * OpenBLAS, and the cl/ arithmetic in vectorised C loops. */
/* host.c - the host backend: the shared arithmetic of cl/ in C loops, and GEMMs either
 * ordered (lib/backends/host/host_gemm.c: every element summed in order with fma, as CLBlast's
 * kernels do; the default device "host") or through OpenBLAS ("host:openblas"). It is also the
 * float64 reference every other backend is compared with. This file: its ops table, its creation
 * (the GEMM engine, its kernels, the thread pool) and destruction, its description and the facts
 * of its arithmetic; the other files by concern: host_internal.h. */
#include "backends/host/host_internal.h"

static void host_destroy(cln_backend *be)
{
    host_backend *hb = (host_backend *)be;
    host_solve_free(hb->kept);
    host_rev_free(hb->rev_kept, hb->rev_kept_f64);
    cln_pool_destroy(hb->pool);
    free(hb->claims);
    free(hb->scratch);
    free(hb->scratch_a);
    free(hb->scratch_c);
    free(hb);
}
static int host_supports(const cln_backend *be, clnode_precision prec)
{
    (void)be;
    return prec == CLNODE_FP32 || prec == CLNODE_FP64;
}
/* The host computes with the CPU's IEEE arithmetic: fp64, denormals (the library never sets
 * flush-to-zero) and correctly rounded division and sqrt always; FMA as the CPU reports it. */
static void host_facts(const cln_backend *be, clnode_device_facts *out)
{
    (void)be;
    out->fp64 = 1;
    out->denormals = 1;
    out->correctly_rounded_div_sqrt = 1;
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__)
    __builtin_cpu_init();
    out->fma = __builtin_cpu_supports("fma") ? 1 : 0;
#elif defined(__aarch64__)
    out->fma = 1; /* part of the ARMv8 base instruction set */
#else
    out->fma = -1;
#endif
}
static const cln_backend_ops host_ops = {
    .name = "host",
    .tf32 = CLN_TF32_EMULATED,
    .destroy = host_destroy,
    .supports = host_supports,
    .buf_alloc = host_buf_alloc,
    .buf_free = host_buf_free,
    .buf_adopt = host_buf_adopt,
    .nonfinite_rows = host_nonfinite_rows,
    .bad_save_ts = host_bad_save_ts,
    .buf_write = host_buf_write,
    .buf_read = host_buf_read,
    .gemm = host_gemm,
    .bias_act = host_bias_act,
    .out_scale = host_out_scale,
    .solve_begin = host_solve_begin,
    .solve_end = host_solve_end,
    .init = host_init,
    .dt0 = host_dt0,
    .stage = host_stage,
    .stage_rhs = host_stage_rhs,
    .rhs = host_rhs,
    .finish = host_finish,
    .steps = host_steps,
    .count_active = host_count_active,
    .swap_rows = host_swap_rows,
    .copy_rows = host_copy_rows, /* no solve_rebind: the passes read sd's buffers each time */
    .facts = host_facts,
    .model_kept = host_model_kept,
    .rev_begin = host_rev_begin,
    .rev_each = host_rev_each,
    .rev_end = host_rev_end,
    .tan_begin = host_tan_begin,
    .tan_each = host_tan_each,
    .tan_end = host_rev_end,
};

/* The probe cache's key for the host: the GEMM engine (and OpenBLAS's build and core), the
 * kernel's ISA and the CPU model. */

static void host_cache_id(host_backend *hb)
{
    char model[128];
    host_cpuinfo_value("model name", model, sizeof model);
    if (hb->openblas)
        snprintf(hb->base.cache_id, sizeof hb->base.cache_id, "openblas %.200s | %.120s",
                 openblas_get_config(), model);
    else
        snprintf(hb->base.cache_id, sizeof hb->base.cache_id, "ordered %s | %.120s",
                 cln_gemm_isa_name(hb->isa), model);
}

/* The device description: the engine, its kernels and its threads. */
static void host_describe(host_backend *hb)
{
    if (hb->openblas)
        snprintf(hb->base.device_name, sizeof hb->base.device_name,
                 "host CPU (OpenBLAS GEMM in %d-row blocks, %d threads)", CLN_HOST_ROWS,
                 openblas_get_num_threads());
    else
        snprintf(hb->base.device_name, sizeof hb->base.device_name,
                 "host CPU (ordered FMA GEMM, %s, %d threads)", cln_gemm_isa_name(hb->isa),
                 cln_pool_threads(hb->pool));
    host_cache_id(hb);
}

static clnode_status host_create(clnode_context *ctx, const cln_device_sel *sel, cln_backend **out)
{
    *out = NULL;
    const int openblas = sel->variant == HOST_OPENBLAS;
    const cln_gemm_isa isa = host_form_isa(sel->variant);
    const char *why = NULL;
    if (!openblas && !cln_gemm_isa_runs(isa, &why))
        return cln_fail(ctx, CLNODE_ERR_UNSUPPORTED, "%s: %s", sel->spec, why);
    host_backend *hb = calloc(1, sizeof *hb);
    CLN_CHECK(ctx, hb, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host backend");
    hb->base.ops = &host_ops;
    hb->base.ctx = ctx;
    hb->base.group_steps = 1; /* reading the active count costs nothing here */
    hb->openblas = openblas;
    hb->isa = isa;
    hb->pool =
        cln_pool_create(ctx->num_threads > 0 ? ctx->num_threads : cln_pool_default_threads());
    const size_t threads = (size_t)cln_pool_threads(hb->pool);
    hb->claims =
        hb->pool ? aligned_alloc(_Alignof(host_claim), threads * sizeof *hb->claims) : NULL;
    if (!hb->pool || !hb->claims) {
        cln_pool_destroy(hb->pool);
        free(hb);
        return cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host thread pool");
    }
    for (size_t p = 0; p < threads; ++p)
        atomic_init(&hb->claims[p].next, 0);
    hb->base.row_align = openblas ? CLN_HOST_ROWS : 1;
    host_describe(hb);
    *out = &hb->base;
    return CLNODE_OK;
}

const cln_backend_desc cln_host_backend = {
    .name = "host",
    .caps = CLN_CAP_FP64,
    .forms = host_forms,
    .num_forms = HOST_NUM_FORMS,
    .available = NULL,
    .create = host_create,
    .list = host_list,
};
