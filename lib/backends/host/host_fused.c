/* host_fused.c - the fused pass's layout: per solve, the model's weights packed once for the
 * ordered GEMM and the row kernels, each thread's activation scratch, and the packed model kept
 * between solves of the same model (solve_begin, solve_end, model_kept). */
#include "backends/host/host_internal.h"

/* n elements of esize bytes rounded up to whole cache lines, in elements; 0 on overflow. */
static size_t host_line_elems(size_t n, size_t esize)
{
    const size_t per = CLN_HOST_LINE / esize;
    return n > (size_t)-1 - per ? 0 : (n + per - 1) / per * per;
}

void host_solve_free(host_solve *hs)
{
    if (hs) {
        free(hs->packed);
        free(hs->panels);
        free(hs->H);
        free(hs->src);
        free(hs);
    }
}
void host_solve_end(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    host_solve *hs = sd->be_data;
    if (hs && hs->complete && hs->src) { /* kept for the next solve (host_kept_fits) */
        host_solve_free(hb->kept);
        hb->kept = hs;
    } else {
        host_solve_free(hs);
    }
    sd->be_data = NULL;
}

/* Whether the kept packed model has this solve's precision, layers and activations. */
static int host_kept_shape(const host_solve *hs, const cln_solve_dev *sd)
{
    const cln_host_mlp *mlp = &hs->mlp;
    if (hs->prec != sd->prec || mlp->layers != sd->num_layers)
        return 0;
    for (size_t l = 0; l < mlp->layers; ++l)
        if (mlp->in[l] != sd->sizes[l] || mlp->out[l] != sd->sizes[l + 1] ||
            mlp->act[l] != sd->act[l] || (mlp->bias[l] != NULL) != (sd->bias[l] != NULL))
            return 0;
    return 1;
}

/* Whether the kept packed model is this solve's: the same model (its serial: a model never
 * changes), or the same shape and weights and biases byte for byte (another model object with
 * the same values, e.g. the benchmarks' copy). */
static int host_kept_fits(const host_solve *hs, const cln_solve_dev *sd)
{
    if (!host_kept_shape(hs, sd))
        return 0;
    if (sd->model_serial != 0 && hs->serial == sd->model_serial)
        return 1;
    const cln_host_mlp *mlp = &hs->mlp;
    const unsigned char *src = hs->src;
    for (size_t l = 0; l < mlp->layers; ++l) {
        const size_t wb = mlp->in[l] * mlp->out[l] * sd->esize, bb = mlp->out[l] * sd->esize;
        if (memcmp(src, sd->W[l]->p, wb) != 0)
            return 0;
        src += wb;
        if (sd->bias[l]) {
            if (memcmp(src, sd->bias[l]->p, bb) != 0)
                return 0;
            src += bb;
        }
    }
    return 1;
}

/* backend.h: the kept model is this solve's by its serial, and solve_begin will take it (the
 * fused pass: the ordered GEMM in strict mode), so the driver need not upload the weights. */
int host_model_kept(cln_backend *be, const cln_solve_dev *sd)
{
    const host_backend *hb = (const host_backend *)be;
    return !hb->openblas && sd->gemm_mode == CLNODE_GEMM_STRICT && hb->kept &&
           sd->model_serial != 0 && hb->kept->serial == sd->model_serial &&
           host_kept_shape(hb->kept, sd);
}

/* Takes over the last solve's packed model when it is this solve's (host_kept_fits): 1 if so. */
static int host_fused_take_kept(host_backend *hb, cln_solve_dev *sd)
{
    if (!hb->kept || !host_kept_fits(hb->kept, sd))
        return 0;
    if (sd->model_serial != 0) /* the same values: this model's next solve skips its upload */
        hb->kept->serial = sd->model_serial;
    sd->be_data = hb->kept;
    hb->kept = NULL;
    return 1;
}

/* Adds layer l's packed elements to *total: its weights, its padded bias and the row kernels'
 * panels (wide <= ldw), each rounded up to whole lines. 0 when a size overflows. */
static int host_layer_elems(const host_backend *hb, const cln_solve_dev *sd,
                            const cln_host_mlp *mlp, size_t l, size_t *total)
{
    size_t e = 0;
    const int fits = cln_mul_size(mlp->in[l] ? mlp->in[l] : 1, mlp->ldw[l], &e);
    /* the weights, the bias, the row kernels' panels */
    const size_t parts[3] = {
        fits ? host_line_elems(e, sd->esize) : 0,
        host_line_elems(mlp->ldw[l], sd->esize),
        host_line_elems(cln_gemv_panels_elems(hb->isa, sd->esize, mlp->wide[l], mlp->in[l]),
                        sd->esize),
    };
    for (int i = 0; i < 3; ++i) {
        const int added = parts[i] != 0 && cln_add_size(*total, parts[i], total);
        if (!added)
            return 0;
    }
    return 1;
}

/* The sizes of a packed model, as the steps of host_fused_begin work them out. */
typedef struct host_fused_sizes {
    size_t total;  /* packed elements: every layer's weights, panels and bias */
    size_t srcn;   /* elements of the model's own copy (weights and biases) */
    size_t panels; /* the row kernels' panels */
    size_t pbytes; /* bytes of the packed model */
    size_t hbytes; /* bytes of every thread's activation scratch */
    int keep;      /* whether the model is small enough to keep a copy of (CLN_HOST_KEEP_BYTES) */
} host_fused_sizes;

/* The packed model's layout, layer by layer (hs->mlp's shapes, leading dimensions, activations
 * and panel counts, hs->fmas_per_row), and its element counts in z (total, srcn, panels). */
static clnode_status host_fused_layout(host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                                       host_fused_sizes *z)
{
    clnode_context *ctx = hb->base.ctx;
    cln_host_mlp *mlp = &hs->mlp;
    const size_t L = sd->num_layers, vec = 32 / sd->esize;
    size_t ldh = vec;
    mlp->layers = L;
    for (size_t l = 0; l < L; ++l) {
        const size_t in = sd->sizes[l], out = sd->sizes[l + 1];
        mlp->in[l] = in;
        mlp->out[l] = out;
        mlp->wide[l] = l + 1 < L ? (out + vec - 1) / vec * vec : out;
        mlp->ldw[l] = cln_gemm_packed_ld(out, sd->esize);
        mlp->act[l] = sd->act[l];
        const int sized = host_layer_elems(hb, sd, mlp, l, &z->total);
        CLN_CHECK(ctx, sized, CLNODE_ERR_OUT_OF_MEMORY,
                  "the packed weights of layer %zu are too large", l);
        mlp->panels[l] = cln_gemv_panel_count(hb->isa, sd->esize, mlp->wide[l]);
        z->panels += mlp->panels[l]; /* at most the columns: cannot overflow */
        hs->fmas_per_row += in * out;
        z->srcn += in * out + (sd->bias[l] ? out : 0); /* cannot overflow: the solve holds them */
        if (l + 1 < L && mlp->wide[l] > ldh)
            ldh = mlp->wide[l];
    }
    mlp->ldh = ldh;
    mlp->stage_n = sd->N;
    return CLNODE_OK;
}

/* The bytes of the packed model (z->pbytes, from its z->total elements) and of every thread's
 * activation scratch (z->hbytes; hs->h_elems per thread): each thread's part of 2 x
 * CLN_HOST_MLP_ROWS x ldh activations and the stage rows, in a region of its own rounded up to
 * CLN_HOST_SCRATCH bytes, and a gap of CLN_HOST_SCRATCH. */
static clnode_status host_fused_bytes(host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                                      host_fused_sizes *z)
{
    const size_t ldh = hs->mlp.ldh, threads = (size_t)cln_pool_threads(hb->pool);
    size_t part_bytes = 0, region = 0;
    int fits = cln_mul_size(z->total, sd->esize, &z->pbytes);
    fits = fits && ldh <= (size_t)-1 / 2 - sd->N;
    fits = fits && cln_mul_size(CLN_HOST_MLP_ROWS * sd->esize, 2 * ldh + sd->N, &part_bytes);
    fits = fits && part_bytes <= (size_t)-1 / 2 - 2 * CLN_HOST_SCRATCH;
    if (fits)
        region = (part_bytes + CLN_HOST_SCRATCH - 1) / CLN_HOST_SCRATCH * CLN_HOST_SCRATCH +
                 CLN_HOST_SCRATCH;
    fits = fits && cln_mul_size(region, threads, &z->hbytes);
    CLN_CHECK(hb->base.ctx, fits, CLNODE_ERR_OUT_OF_MEMORY, "the packed model is too large");
    hs->h_elems = z->hbytes / threads / sd->esize;
    return CLNODE_OK;
}

/* Allocates the packed model (zeros: the padding of weights and biases), its panels, the
 * threads' scratch and, when z->keep, the model's own copy. A model too large to keep a copy of
 * is packed again by every solve (where the packing costs little beside the solve's own work). */
static clnode_status host_fused_alloc(host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                                      host_fused_sizes *z)
{
    hs->packed = host_zalloc(z->pbytes, CLN_HOST_LINE);
    hs->panels = malloc(z->panels * sizeof *hs->panels);
    hs->H = host_zalloc(z->hbytes, CLN_HOST_PAGE);
    z->keep = z->srcn * sd->esize <= CLN_HOST_KEEP_BYTES;
    hs->src = z->keep ? malloc(z->srcn ? z->srcn * sd->esize : 1) : NULL;
    const int allocated = hs->packed && hs->panels && hs->H && (hs->src || !z->keep);
    CLN_CHECK(hb->base.ctx, allocated, CLNODE_ERR_OUT_OF_MEMORY,
              "cannot allocate %zu bytes for the packed model", z->pbytes + z->hbytes);
    return CLNODE_OK;
}

/* Packs every layer into hs->packed (weights, row-kernel panels, bias) and hs->panels, and copies
 * the model's weights and biases to hs->src when `keep`. */
static void host_fused_pack(const host_backend *hb, const cln_solve_dev *sd, host_solve *hs,
                            int keep)
{
    cln_host_mlp *mlp = &hs->mlp;
    unsigned char *p = hs->packed, *src = hs->src;
    cln_gemv_panel *pn = hs->panels;
    for (size_t l = 0; l < sd->num_layers; ++l) {
        for (size_t q = 0; q < mlp->panels[l]; ++q)
            pn[q] = cln_gemv_panel_at(hb->isa, sd->esize, mlp->wide[l], q);
        mlp->panel[l] = pn;
        pn += mlp->panels[l];
        const size_t k = mlp->in[l], n = mlp->out[l];
        if (sd->prec == CLNODE_FP32)
            cln_gemm_pack_f32(n, k, HOST_F32(sd->W[l], 0), k, (float *)(void *)p, mlp->ldw[l]);
        else
            cln_gemm_pack_f64(n, k, HOST_F64(sd->W[l], 0), k, (double *)(void *)p, mlp->ldw[l]);
        mlp->Wt[l] = p;
        p += host_line_elems((k ? k : 1) * mlp->ldw[l], sd->esize) * sd->esize;
        /* the row kernels' panels from the packed weights (wide[l] is out rounded up to 32
         * bytes, and its vectors, of any ISA, fit in ldw: n rounded up to 128 bytes) */
        if (sd->prec == CLNODE_FP32)
            cln_gemv_pack_panels_f32(hb->isa, mlp->wide[l], k, (const float *)mlp->Wt[l],
                                     mlp->ldw[l], (float *)(void *)p);
        else
            cln_gemv_pack_panels_f64(hb->isa, mlp->wide[l], k, (const double *)mlp->Wt[l],
                                     mlp->ldw[l], (double *)(void *)p);
        mlp->Wr[l] = p;
        p +=
            host_line_elems(cln_gemv_panels_elems(hb->isa, sd->esize, mlp->wide[l], k), sd->esize) *
            sd->esize;
        if (keep) {
            memcpy(src, sd->W[l]->p, k * n * sd->esize);
            src += k * n * sd->esize;
        }
        mlp->bias[l] = NULL;
        if (sd->bias[l]) {
            memcpy(p, sd->bias[l]->p, n * sd->esize);
            mlp->bias[l] = p;
            if (keep) {
                memcpy(src, sd->bias[l]->p, n * sd->esize);
                src += n * sd->esize;
            }
        }
        p += host_line_elems(mlp->ldw[l], sd->esize) * sd->esize;
    }
}

/* A new solve state for this solve (sd->be_data, freed by host_solve_end), in place of the kept
 * one, which is freed. */
static clnode_status host_fused_new(host_backend *hb, cln_solve_dev *sd, host_solve **out)
{
    host_solve_free(hb->kept);
    hb->kept = NULL;
    host_solve *hs = calloc(1, sizeof *hs);
    *out = hs;
    CLN_CHECK(hb->base.ctx, hs, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate the host solve state");
    sd->be_data = hs;
    hs->prec = sd->prec;
    hs->serial = sd->model_serial;
    return CLNODE_OK;
}

/* The fused pass (stage + MLP, host_mlp.inc) needs the ordered GEMM in strict mode: takes over
 * the last solve's packed model when it packed the same model, or lays the model out, sizes it
 * and each thread's activation scratch, allocates them and packs every layer's weights. */
static clnode_status host_fused_begin(host_backend *hb, cln_solve_dev *sd)
{
    if (host_fused_take_kept(hb, sd))
        return CLNODE_OK;
    host_solve *hs = NULL;
    host_fused_sizes z = {0};
    clnode_status st = host_fused_new(hb, sd, &hs);
    if (st == CLNODE_OK)
        st = host_fused_layout(hb, sd, hs, &z);
    if (st == CLNODE_OK)
        st = host_fused_bytes(hb, sd, hs, &z);
    if (st == CLNODE_OK)
        st = host_fused_alloc(hb, sd, hs, &z);
    if (st != CLNODE_OK)
        return st;
    host_fused_pack(hb, sd, hs, z.keep);
    hs->complete = 1;
    return CLNODE_OK;
}

clnode_status host_solve_begin(cln_backend *be, cln_solve_dev *sd)
{
    host_backend *hb = (host_backend *)be;
    /* the plain GEMM's scratch for the largest packed weight matrix, so that steps never
     * allocate */
    size_t packed = sd->max_weights, max_out = 1;
    for (size_t l = 0; l < sd->num_layers; ++l) {
        const size_t k = sd->sizes[l] ? sd->sizes[l] : 1;
        const size_t e = cln_gemm_packed_ld(sd->sizes[l + 1], sd->esize) * k;
        packed = e > packed ? e : packed;
        max_out = sd->sizes[l + 1] > max_out ? sd->sizes[l + 1] : max_out;
    }
    clnode_status st = host_scratch(hb, packed * sd->esize);
    if (st == CLNODE_OK && sd->gemm_mode == CLNODE_GEMM_TF32)
        st = host_scratch_a(hb, sd->B * sd->max_in * sd->esize); /* the rounded A of every layer */
    if (st == CLNODE_OK && hb->openblas) /* one block of the widest layer's output */
        st = host_grow(hb, &hb->scratch_c, &hb->scratch_c_cap, CLN_HOST_ROWS * max_out * sd->esize);
    if (st == CLNODE_OK && !hb->openblas && sd->gemm_mode == CLNODE_GEMM_STRICT)
        st = host_fused_begin(hb, sd);
    if (st == CLNODE_OK && sd->be_data) { /* this solve's scale, the packed model kept or not */
        host_solve *hs = sd->be_data;
        hs->mlp.scale = sd->scale ? sd->scale->p : NULL;
        hs->mlp.scale_n = sd->scale ? sd->scale_n : 0;
    }
    if (st != CLNODE_OK)
        host_solve_end(be, sd);
    return st;
}
