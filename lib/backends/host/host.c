/* lib/backends/host/: the host CPU backend: the ordered GEMM (AVX-512, AVX2, portable) or
 * OpenBLAS, and the cl/ arithmetic in vectorised C loops. */
/* host.c - the host backend: the shared arithmetic of cl/ in C loops, and GEMMs either
 * ordered (host_gemm.c: every element summed in order with fma, as CLBlast's kernels do; the
 * default device "host") or through OpenBLAS ("host:openblas"). It is also the float64 reference
 * every other backend is compared with. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

#include <unistd.h>

#include "backends/host/host_gemm.h"
#include "backends/host/host_math.h"
#include "backends/registry.h"
#include "cln_layout.h"

struct cln_buf {
    size_t size;
    unsigned char *p;
};

/* Rows of every OpenBLAS call (see host_gemm). */
#define CLN_HOST_ROWS 16

typedef struct host_backend {
    cln_backend base;
    int openblas;     /* 1: OpenBLAS in blocks of CLN_HOST_ROWS rows; 0: ordered GEMM */
    cln_gemm_isa isa; /* kernel of the ordered GEMM */
    void *scratch;    /* the transposed B of the ordered GEMM (TF32-rounded in tf32 mode) */
    size_t scratch_cap;
    void *scratch_a; /* tf32 mode: A rounded to TF32 */
    size_t scratch_a_cap;
} host_backend;

static void host_destroy(cln_backend *be)
{
    host_backend *hb = (host_backend *)be;
    free(hb->scratch);
    free(hb->scratch_a);
    free(hb);
}

/* Makes a grow-only GEMM scratch hold `bytes`; it grows only when a larger product is first seen
 * (solve_begin sizes both for the whole model, so steps never allocate). */
static clnode_status host_grow(host_backend *hb, void **buf, size_t *cap, size_t bytes)
{
    if (bytes <= *cap)
        return CLNODE_OK;
    void *p = realloc(*buf, bytes);
    CLN_CHECK(hb->base.ctx, p, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate %zu bytes of GEMM scratch", bytes);
    *buf = p;
    *cap = bytes;
    return CLNODE_OK;
}

static clnode_status host_scratch(host_backend *hb, size_t bytes)
{
    return host_grow(hb, &hb->scratch, &hb->scratch_cap, bytes);
}

static clnode_status host_scratch_a(host_backend *hb, size_t bytes)
{
    return host_grow(hb, &hb->scratch_a, &hb->scratch_a_cap, bytes);
}

static int host_supports(const cln_backend *be, clnode_precision prec)
{
    (void)be;
    return prec == CLNODE_FP32 || prec == CLNODE_FP64;
}

static clnode_status host_buf_alloc(cln_backend *be, size_t bytes, cln_buf **out)
{
    *out = NULL;
    cln_buf *b = calloc(1, sizeof *b);
    if (!b)
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a buffer handle");
    /* calloc: unused parts of the save buffers read back as zeros, never as garbage */
    b->p = calloc(bytes ? bytes : 1, 1);
    if (!b->p) {
        free(b);
        return cln_fail(be->ctx, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu bytes on the host",
                        bytes);
    }
    b->size = bytes;
    *out = b;
    return CLNODE_OK;
}

static void host_buf_free(cln_backend *be, cln_buf *b)
{
    (void)be;
    if (b)
        free(b->p);
    free(b);
}

static clnode_status host_buf_write(cln_backend *be, cln_buf *b, size_t off, size_t bytes,
                                    const void *src)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "host buffer write out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        memcpy(b->p + off, src, bytes);
    return CLNODE_OK;
}

static clnode_status host_buf_read(cln_backend *be, cln_buf *b, size_t off, size_t bytes, void *dst)
{
    CLN_CHECK(be->ctx, off <= b->size && bytes <= b->size - off, CLNODE_ERR_INTERNAL,
              "host buffer read out of range (%zu + %zu > %zu)", off, bytes, b->size);
    if (bytes)
        memcpy(dst, b->p + off, bytes);
    return CLNODE_OK;
}

#define HOST_F32(buf, off) ((float *)(void *)(buf)->p + (off))
#define HOST_F64(buf, off) ((double *)(void *)(buf)->p + (off))

static clnode_status host_gemm(cln_backend *be, clnode_precision prec, clnode_gemm_mode mode,
                               size_t m, size_t n, size_t k, cln_buf *A, size_t a_off, size_t lda,
                               cln_buf *Bm, size_t b_off, size_t ldb, cln_buf *C, size_t c_off,
                               size_t ldc)
{
    const clnode_status gm = cln_check_gemm_mode(be->ctx, prec, mode);
    if (gm != CLNODE_OK)
        return gm;
    if (m == 0 || n == 0)
        return CLNODE_OK;
    host_backend *hb = (host_backend *)be;
    const int tf32 = mode == CLNODE_GEMM_TF32;
    const size_t esize = prec == CLNODE_FP32 ? sizeof(float) : sizeof(double);
    if (!hb->openblas || tf32) {
        /* scratch: B transposed (ordered GEMM) or B rounded (OpenBLAS tf32), and A rounded */
        size_t bytes, abytes = 0;
        CLN_CHECK(be->ctx, cln_mul_size(n, k ? k : 1, &bytes) && cln_mul_size(bytes, esize, &bytes),
                  CLNODE_ERR_OUT_OF_MEMORY, "GEMM of %zu x %zu is too large", n, k);
        CLN_CHECK(be->ctx,
                  !tf32 ||
                      (cln_mul_size(m, k ? k : 1, &abytes) && cln_mul_size(abytes, esize, &abytes)),
                  CLNODE_ERR_OUT_OF_MEMORY, "GEMM of %zu x %zu is too large", m, k);
        clnode_status st = host_scratch(hb, bytes);
        if (st == CLNODE_OK && tf32)
            st = host_scratch_a(hb, abytes);
        if (st != CLNODE_OK)
            return st;
    }
    if (!hb->openblas) {
        if (tf32)
            cln_gemm_ordered_tf32(hb->isa, m, n, k, HOST_F32(A, a_off), lda, HOST_F32(Bm, b_off),
                                  ldb, HOST_F32(C, c_off), ldc, hb->scratch, hb->scratch_a);
        else if (prec == CLNODE_FP32)
            cln_gemm_ordered_f32(hb->isa, m, n, k, HOST_F32(A, a_off), lda, HOST_F32(Bm, b_off),
                                 ldb, HOST_F32(C, c_off), ldc, hb->scratch);
        else
            cln_gemm_ordered_f64(hb->isa, m, n, k, HOST_F64(A, a_off), lda, HOST_F64(Bm, b_off),
                                 ldb, HOST_F64(C, c_off), ldc, hb->scratch);
        return CLNODE_OK;
    }
    /* OpenBLAS rounds a row differently depending on the number of rows of the call (its
     * small-matrix and edge kernels sum in other orders; measured on the seed shapes), which
     * would make a trajectory's steps depend on its batch. Every call therefore has exactly
     * CLN_HOST_ROWS rows: the same kernel path for every row, whatever the batch. */
    CLN_CHECK(be->ctx, m % CLN_HOST_ROWS == 0, CLNODE_ERR_INTERNAL,
              "host GEMM with %zu rows (not a multiple of %d)", m, CLN_HOST_ROWS);
    if (tf32) { /* OpenBLAS on TF32-rounded copies: fp32 accumulation in OpenBLAS's order */
        cln_tf32_round_rows(m, k, HOST_F32(A, a_off), lda, hb->scratch_a, k);
        cln_tf32_round_rows(n, k, HOST_F32(Bm, b_off), ldb, hb->scratch, k);
        for (size_t r = 0; r < m; r += CLN_HOST_ROWS)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, CLN_HOST_ROWS, (blasint)n,
                        (blasint)k, 1.0f, (const float *)hb->scratch_a + r * k, (blasint)k,
                        hb->scratch, (blasint)k, 0.0f, HOST_F32(C, c_off + r * ldc), (blasint)ldc);
        return CLNODE_OK;
    }
    for (size_t r = 0; r < m; r += CLN_HOST_ROWS) {
        if (prec == CLNODE_FP32)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, CLN_HOST_ROWS, (blasint)n,
                        (blasint)k, 1.0f, HOST_F32(A, a_off + r * lda), (blasint)lda,
                        HOST_F32(Bm, b_off), (blasint)ldb, 0.0f, HOST_F32(C, c_off + r * ldc),
                        (blasint)ldc);
        else
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, CLN_HOST_ROWS, (blasint)n,
                        (blasint)k, 1.0, HOST_F64(A, a_off + r * lda), (blasint)lda,
                        HOST_F64(Bm, b_off), (blasint)ldb, 0.0, HOST_F64(C, c_off + r * ldc),
                        (blasint)ldc);
    }
    return CLNODE_OK;
}

static clnode_status host_bias_act(cln_backend *be, cln_solve_dev *sd, cln_buf *C, size_t c_off,
                                   size_t ldc, size_t m, size_t n, cln_buf *bias, int act)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_bias_act_f32(HOST_F32(C, c_off), ldc, m, n, bias ? HOST_F32(bias, 0) : NULL, act);
    else
        cln_host_bias_act_f64(HOST_F64(C, c_off), ldc, m, n, bias ? HOST_F64(bias, 0) : NULL, act);
    return CLNODE_OK;
}

static clnode_status host_solve_begin(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    clnode_status st = host_scratch(hb, sd->max_weights * sd->esize);
    if (st == CLNODE_OK && sd->gemm_mode == CLNODE_GEMM_TF32)
        st = host_scratch_a(hb, sd->B * sd->max_in * sd->esize); /* the rounded A of every layer */
    return st;
}

static void host_solve_end(cln_backend *be, cln_solve_dev *sd)
{
    (void)be;
    (void)sd;
}

#define HOST_I32(buf) ((int32_t *)(void *)(buf)->p)

static clnode_status host_init(cln_backend *be, cln_solve_dev *sd)
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

static clnode_status host_stage(cln_backend *be, cln_solve_dev *sd, int i)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_stage_f32(i, HOST_F32(sd->CR, 0), HOST_I32(sd->CI), HOST_F32(sd->RS, 0),
                           HOST_I32(sd->IS), HOST_F32(sd->Y, 0), HOST_F32(sd->F, 0),
                           HOST_F32(sd->Z, 0));
    else
        cln_host_stage_f64(i, HOST_F64(sd->CR, 0), HOST_I32(sd->CI), HOST_F64(sd->RS, 0),
                           HOST_I32(sd->IS), HOST_F64(sd->Y, 0), HOST_F64(sd->F, 0),
                           HOST_F64(sd->Z, 0));
    return CLNODE_OK;
}

static clnode_status host_finish(cln_backend *be, cln_solve_dev *sd)
{
    (void)be;
    if (sd->prec == CLNODE_FP32)
        cln_host_finish_f32(HOST_F32(sd->CR, 0), HOST_I32(sd->CI), HOST_F32(sd->RS, 0),
                            HOST_I32(sd->IS), HOST_F32(sd->Y, 0), HOST_F32(sd->F, 0),
                            HOST_F32(sd->Z, 0), HOST_F32(sd->TS, 0), HOST_F32(sd->TSOUT, 0),
                            HOST_F32(sd->STT, 0), HOST_F32(sd->STY, 0));
    else
        cln_host_finish_f64(HOST_F64(sd->CR, 0), HOST_I32(sd->CI), HOST_F64(sd->RS, 0),
                            HOST_I32(sd->IS), HOST_F64(sd->Y, 0), HOST_F64(sd->F, 0),
                            HOST_F64(sd->Z, 0), HOST_F64(sd->TS, 0), HOST_F64(sd->TSOUT, 0),
                            HOST_F64(sd->STT, 0), HOST_F64(sd->STY, 0));
    return CLNODE_OK;
}

static clnode_status host_count_active(cln_backend *be, cln_solve_dev *sd, size_t *active)
{
    (void)be;
    const cln_istate *is = (const cln_istate *)(const void *)HOST_I32(sd->IS);
    size_t n = 0;
    for (size_t b = 0; b < sd->B; ++b)
        n += is[b].done == 0;
    *active = n;
    return CLNODE_OK;
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
    .destroy = host_destroy,
    .supports = host_supports,
    .buf_alloc = host_buf_alloc,
    .buf_free = host_buf_free,
    .buf_write = host_buf_write,
    .buf_read = host_buf_read,
    .gemm = host_gemm,
    .bias_act = host_bias_act,
    .solve_begin = host_solve_begin,
    .solve_end = host_solve_end,
    .init = host_init,
    .stage = host_stage,
    .finish = host_finish,
    .count_active = host_count_active,
    .facts = host_facts,
};

/* The forms of "host" device strings (lib/backends/registry.h). */
enum {
    HOST_ORDERED,
    HOST_OPENBLAS
};
static const cln_device_form host_forms[] = {
    {"", HOST_ORDERED, "the CPU: the ordered FMA GEMM and the cl/ arithmetic in C (the default)"},
    {"openblas", HOST_OPENBLAS, "the CPU with OpenBLAS GEMMs (fixed 16-row blocks)"},
};

static clnode_status host_create(clnode_context *ctx, const cln_device_sel *sel, cln_backend **out)
{
    *out = NULL;
    const int openblas = sel->variant == HOST_OPENBLAS;
    host_backend *hb = calloc(1, sizeof *hb);
    CLN_CHECK(ctx, hb, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host backend");
    hb->base.ops = &host_ops;
    hb->base.ctx = ctx;
    hb->base.group_steps = 1; /* reading the active count costs nothing here */
    hb->openblas = openblas;
    hb->isa = cln_gemm_best_isa();
    hb->base.row_align = openblas ? CLN_HOST_ROWS : 1;
    if (openblas)
        snprintf(hb->base.device_name, sizeof hb->base.device_name,
                 "host CPU (OpenBLAS GEMM in %d-row blocks, %d threads)", CLN_HOST_ROWS,
                 openblas_get_num_threads());
    else
        snprintf(hb->base.device_name, sizeof hb->base.device_name,
                 "host CPU (ordered FMA GEMM, %s, %d threads)", cln_gemm_isa_name(hb->isa),
                 cln_host_threads());
    *out = &hb->base;
    return CLNODE_OK;
}

/* ---- the devices: the CPU, once per GEMM engine ---- */

/* "model name : Intel(R) ..." -> the value of the first line with that key, or "". */
static void cpuinfo_value(const char *key, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    const size_t n = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, key, n) != 0)
            continue;
        const char *v = strchr(line + n, ':');
        if (!v)
            continue;
        ++v;
        while (*v == ' ' || *v == '\t')
            ++v;
        snprintf(out, cap, "%s", v);
        out[strcspn(out, "\r\n")] = '\0';
        break;
    }
    fclose(f);
}

static clnode_status host_list(clnode_context *ctx, cln_device_sink *sink)
{
    (void)ctx;
    static const char *const engines[] = {"ordered FMA GEMM", "OpenBLAS"}; /* per host_forms */
    _Static_assert(sizeof engines / sizeof engines[0] == sizeof host_forms / sizeof host_forms[0],
                   "one engine per form");
    char name[256], vendor[256];
    cpuinfo_value("model name", name, sizeof name);
    cpuinfo_value("vendor_id", vendor, sizeof vendor);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; ++i) {
        clnode_device_info *d = cln_device_sink_add(sink, i == 0);
        if (!d)
            return CLNODE_ERR_OUT_OF_MEMORY;
        snprintf(d->spec, sizeof d->spec, "host%s%s", host_forms[i].syntax[0] ? ":" : "",
                 host_forms[i].syntax);
        snprintf(d->engine, sizeof d->engine, "%s", engines[i]);
        snprintf(d->name, sizeof d->name, "%s", name[0] ? name : "host CPU");
        snprintf(d->vendor, sizeof d->vendor, "%s", vendor);
        d->compute_units = cpus > 0 ? (unsigned)cpus : 0;
        d->global_mem =
            pages > 0 && page > 0 ? (unsigned long long)pages * (unsigned long long)page : 0;
        d->fp64 = 1;
    }
    return CLNODE_OK;
}

const cln_backend_desc cln_host_backend = {
    .name = "host",
    .caps = CLN_CAP_FP64,
    .forms = host_forms,
    .num_forms = sizeof host_forms / sizeof host_forms[0],
    .available = NULL,
    .create = host_create,
    .list = host_list,
};
