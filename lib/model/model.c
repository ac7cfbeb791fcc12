/* lib/model/: the vector field dy/dt = MLP(y): models built from arrays, loaded from safetensors
 * files, and the built-in seed model. */
/* model.c - MLP vector fields built from arrays and their accessors. The safetensors loader and the
 * embedded seed model (safetensors.c) build on it; nothing here calls them. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/host/host_math.h"
#include "core/fpenv.h"
#include "core/internal.h"
#include "model/model.h"

/* The names, indexed by value (the list's values run 0, 1, ... in order: checked below). */
static const char *const cln_act_names[] = {
#define CLN_X_NAME(name, value, str) [value] = str,
    CLNODE_ACTIVATION_LIST(CLN_X_NAME)
#undef CLN_X_NAME
};
#define CLN_X_COUNT(name, value, str) +1
enum {
    CLN_ACT_COUNT = 0 CLNODE_ACTIVATION_LIST(CLN_X_COUNT)
};
#undef CLN_X_COUNT
_Static_assert(sizeof cln_act_names / sizeof cln_act_names[0] == CLN_ACT_COUNT,
               "activation values are 0 .. count - 1");

size_t clnode_activation_count(void)
{
    return CLN_ACT_COUNT;
}

const char *cln_activation_list(void)
{
#define CLN_X_STR(name, value, str) ", " str
    static const char list[] = CLNODE_ACTIVATION_LIST(CLN_X_STR);
#undef CLN_X_STR
    return list + 2;
}

const cln_model_view *cln_model_view_of(const clnode_model *m, cln_model_view *v)
{
    memset(v, 0, sizeof *v);
    v->num_layers = m->num_layers;
    v->sizes = m->sizes;
    for (size_t l = 0; l < m->num_layers; ++l) {
        v->act[l] = (int)(l + 1 == m->num_layers ? m->final_activation : m->activation);
        v->W[l] = m->weights[l];
        v->bias[l] = m->biases[l];
    }
    v->out_scale = m->out_scale;
    v->out_scale_n = m->out_scale_n;
    v->time_input = m->time_input;
    v->num_inputs = m->num_inputs;
    return v;
}

const char *clnode_activation_name(clnode_activation act)
{
    if ((unsigned)act < sizeof cln_act_names / sizeof cln_act_names[0])
        return cln_act_names[act];
    return "unknown";
}

clnode_status clnode_activation_from_name(const char *name, clnode_activation *out)
{
    if (!name || !out)
        return CLNODE_ERR_INVALID_ARGUMENT;
    for (size_t i = 0; i < sizeof cln_act_names / sizeof cln_act_names[0]; ++i) {
        if (strcmp(name, cln_act_names[i]) == 0) {
            *out = (clnode_activation)i;
            return CLNODE_OK;
        }
    }
    return CLNODE_ERR_INVALID_ARGUMENT;
}

static int cln_act_valid(clnode_activation a)
{
    return (unsigned)a < sizeof cln_act_names / sizeof cln_act_names[0];
}

void clnode_model_destroy(clnode_model **pm)
{
    if (!pm || !*pm)
        return;
    clnode_model *m = *pm;
    for (size_t i = 0; i < m->num_layers; ++i) {
        free(m->weights[i]);
        free(m->biases[i]);
    }
    for (size_t i = 0; i < 2 * m->num_meta; ++i)
        free(m->meta[i]);
    free(m->meta);
    free(m->out_scale);
    free(m);
    *pm = NULL;
}

/* Marks the layer index of the output scale for cln_copy_finite. */
#define CLN_SCALE_LAYER ((size_t)-1)

/* Whether src[0..n) are all below the float range in magnitude (so finite too: a NaN compares
 * false): their magnitudes (the sign bit cleared) compared two at a time in the compiler's vector
 * types (SSE2's width), so that a model's usual parameters cost one vector pass; the
 * element-wise checks of cln_copy_finite name the first that is not. */
typedef double cln_f64x2 __attribute__((vector_size(16)));
typedef int64_t cln_i64x2 __attribute__((vector_size(16)));
static int cln_all_f32(const double *src, size_t n)
{
    const double lim = CLN_FP32_LIMIT;
    const int64_t mag = INT64_MAX;
    const cln_i64x2 mags = {mag, mag};
    const cln_f64x2 lims = {lim, lim};
    cln_i64x2 in = {-1, -1};
    size_t i = 0;
    for (; i + 2 <= n; i += 2) {
        cln_i64x2 v;
        memcpy(&v, src + i, sizeof v);
        in &= (cln_f64x2)(v & mags) < lims;
    }
    int all = (in[0] & in[1]) != 0;
    for (; i < n; ++i)
        all &= fabs(src[i]) < lim;
    return all;
}

/* Copies n doubles after checking they are finite; `what` names them in the error (layer
 * CLN_SCALE_LAYER: the output scale). The first parameter of the model beyond the float range is
 * recorded in m (f32_*): an fp32 solve refuses the model, an fp64 solve takes it. */
static clnode_status cln_copy_finite(clnode_context *ctx, clnode_model *m, const double *src,
                                     size_t n, const char *what, size_t layer, double **dst)
{
    const int scale = layer == CLN_SCALE_LAYER;
    for (size_t i = cln_all_f32(src, n) ? n : 0; i < n; ++i) {
        CLN_CHECK(ctx, isfinite(src[i]) || !scale, CLNODE_ERR_NONFINITE_INPUT,
                  "model out_scale: element %zu is %g (the output scale must be finite)", i,
                  src[i]);
        CLN_CHECK(ctx, isfinite(src[i]), CLNODE_ERR_NONFINITE_INPUT,
                  "model layer %zu %s: element %zu is %g (parameters must be finite)", layer, what,
                  i, src[i]);
        if (!m->f32_over && !(fabs(src[i]) < CLN_FP32_LIMIT)) {
            m->f32_over = 1;
            m->f32_scale = scale;
            m->f32_bias = strcmp(what, "bias") == 0;
            m->f32_layer = scale ? 0 : layer;
            m->f32_index = i;
            m->f32_value = src[i];
        }
    }
    *dst = malloc(n ? n * sizeof(double) : 1);
    CLN_CHECK(ctx, *dst, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu model parameters", n);
    if (n)
        memcpy(*dst, src, n * sizeof(double));
    return CLNODE_OK;
}

/* The output scale of the description into m (after the layers: the fp32 bookkeeping names the
 * first parameter beyond the float range in that order). */
static clnode_status cln_copy_scale(clnode_context *ctx, const clnode_model_desc *d,
                                    clnode_model *m)
{
    const size_t n_out = d->sizes[d->num_layers];
    if (!d->out_scale) {
        CLN_CHECK(ctx, d->out_scale_size == 0, CLNODE_ERR_INVALID_ARGUMENT,
                  "the model's out_scale_size is %zu but out_scale is NULL", d->out_scale_size);
        return CLNODE_OK;
    }
    CLN_CHECK(ctx, d->out_scale_size == 1 || d->out_scale_size == n_out,
              CLNODE_ERR_INVALID_ARGUMENT,
              "the model's out_scale has %zu values; it takes 1 (a scalar) or the state dimension "
              "%zu (one per component)",
              d->out_scale_size, n_out);
    const clnode_status st = cln_copy_finite(ctx, m, d->out_scale, d->out_scale_size, "out_scale",
                                             CLN_SCALE_LAYER, &m->out_scale);
    if (st == CLNODE_OK)
        m->out_scale_n = d->out_scale_size;
    return st;
}

/* The documented defaults (clnode/model.h). A field appended to clnode_model_desc gets its
 * default here (zero, as CLNODE_MODEL_DESC_DEFAULTS promises) and is read only from programs
 * whose struct_size covers it (the sizes policy of clnode/common.h). */
static void cln_model_desc_defaults(clnode_model_desc *d)
{
    memset(d, 0, sizeof *d);
    d->struct_size = sizeof *d;
    d->activation = CLNODE_ACT_IDENTITY;
    d->final_activation = CLNODE_ACT_IDENTITY;
}

CLN_DEFAULTS_SIZED(clnode_model_default_desc_sized, clnode_model_desc, cln_model_desc_defaults)

clnode_status clnode_model_create(clnode_context *ctx, const clnode_model_desc *in,
                                  clnode_model **out)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, out, CLNODE_ERR_INVALID_ARGUMENT, "clnode_model_create: out is NULL");
    *out = NULL;
    CLN_CHECK(ctx, in, CLNODE_ERR_INVALID_ARGUMENT, "clnode_model_create: missing description");
    /* the program's description as this library's struct: the fields it knows, defaults for the
     * rest */
    clnode_model_desc full;
    cln_model_desc_defaults(&full);
    const clnode_status size_st =
        cln_struct_import(ctx, "clnode_model_desc", in, CLN_MODEL_DESC_MIN, &full, sizeof full);
    if (size_st != CLNODE_OK)
        return size_st;
    const clnode_model_desc *d = &full;
    CLN_CHECK(ctx, d->sizes && d->weights, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_model_create: missing sizes or weights");
    CLN_CHECK(ctx, d->num_layers >= 1 && d->num_layers <= CLN_MAX_LAYERS,
              CLNODE_ERR_INVALID_ARGUMENT, "a model needs 1 to %d layers, not %zu", CLN_MAX_LAYERS,
              d->num_layers);
    CLN_CHECK(ctx, cln_act_valid(d->activation) && cln_act_valid(d->final_activation),
              CLNODE_ERR_INVALID_ARGUMENT, "unknown activation code %d or %d", (int)d->activation,
              (int)d->final_activation);
    for (size_t i = 0; i <= d->num_layers; ++i)
        CLN_CHECK(ctx, d->sizes[i] >= 1 && d->sizes[i] <= (1u << 24), CLNODE_ERR_INVALID_ARGUMENT,
                  "layer width %zu is %zu (must be 1 to 16777216)", i, d->sizes[i]);
    const size_t n_out = d->sizes[d->num_layers];
    CLN_CHECK(ctx, d->num_inputs <= (1u << 24), CLNODE_ERR_INVALID_ARGUMENT,
              "%zu conditioning inputs are too many", d->num_inputs);
    const size_t want_in = n_out + (d->time_input ? 1 : 0) + d->num_inputs;
    CLN_CHECK(ctx, d->sizes[0] == want_in, CLNODE_ERR_INVALID_ARGUMENT,
              "the model maps %zu inputs to %zu outputs; a vector field of dimension %zu needs "
              "%zu inputs (state%s, %zu conditioning inputs)",
              d->sizes[0], n_out, n_out, want_in, d->time_input ? ", time" : "", d->num_inputs);

    clnode_status st = CLNODE_OK;
    clnode_model *m = calloc(1, sizeof *m);
    CLN_CHECK(ctx, m, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate a model");
    m->num_layers = d->num_layers;
    memcpy(m->sizes, d->sizes, (d->num_layers + 1) * sizeof(size_t));
    m->activation = d->activation;
    m->final_activation = d->final_activation;
    m->time_input = d->time_input ? 1 : 0;
    m->num_inputs = d->num_inputs;
    static _Atomic unsigned long long serials;
    m->serial = ++serials;
    for (size_t i = 0; i < d->num_layers; ++i) {
        size_t nw;
        if (!cln_mul_size(d->sizes[i], d->sizes[i + 1], &nw)) {
            st = cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "layer %zu is too large", i);
            goto fail;
        }
        if (!d->weights[i]) {
            st = cln_fail(ctx, CLNODE_ERR_INVALID_ARGUMENT, "layer %zu has no weights", i);
            goto fail;
        }
        CLN_TRY(st, cln_copy_finite(ctx, m, d->weights[i], nw, "weight", i, &m->weights[i]));
        if (d->biases && d->biases[i])
            CLN_TRY(st, cln_copy_finite(ctx, m, d->biases[i], d->sizes[i + 1], "bias", i,
                                        &m->biases[i]));
    }
    CLN_TRY(st, cln_copy_scale(ctx, d, m));
    *out = m;
    return CLNODE_OK;
fail:
    clnode_model_destroy(&m);
    return st;
}

size_t clnode_model_dim(const clnode_model *m)
{
    return m->sizes[m->num_layers];
}

size_t clnode_model_num_layers(const clnode_model *m)
{
    return m->num_layers;
}

size_t clnode_model_layer_in(const clnode_model *m, size_t i)
{
    return i < m->num_layers ? m->sizes[i] : 0;
}

size_t clnode_model_layer_out(const clnode_model *m, size_t i)
{
    return i < m->num_layers ? m->sizes[i + 1] : 0;
}

const double *clnode_model_weight(const clnode_model *m, size_t i)
{
    return i < m->num_layers ? m->weights[i] : NULL;
}

const double *clnode_model_bias(const clnode_model *m, size_t i)
{
    return i < m->num_layers ? m->biases[i] : NULL;
}

clnode_activation clnode_model_activation(const clnode_model *m)
{
    return m->activation;
}

clnode_activation clnode_model_final_activation(const clnode_model *m)
{
    return m->final_activation;
}

int clnode_model_time_input(const clnode_model *m)
{
    return m->time_input;
}

/* The vector field at one point: the input row `in` (sizes[0] values) through every layer, h
 * scratch of 2 x maxw values, the result (dim values) to dydt. */
static void cln_eval_point(const clnode_model *m, size_t maxw, double *h, double *dydt)
{
    double *in = h, *out = h + maxw;
    for (size_t l = 0; l < m->num_layers; ++l) {
        const size_t ni = m->sizes[l], no = m->sizes[l + 1];
        for (size_t j = 0; j < no; ++j) {
            const double *w = m->weights[l] + j * ni;
            double acc = 0.0;
            for (size_t k = 0; k < ni; ++k)
                acc = fma(in[k], w[k], acc);
            out[j] = acc;
        }
        const int act = l + 1 < m->num_layers ? (int)m->activation : (int)m->final_activation;
        cln_host_bias_act_f64(CLN_GEMM_PORTABLE, out, no, 1, no, m->biases[l], act);
        double *tmp = in;
        in = out;
        out = tmp;
    }
    const size_t dim = m->sizes[m->num_layers];
    if (m->out_scale)
        cln_host_out_scale_f64(CLN_GEMM_PORTABLE, in, dim, 1, dim, m->out_scale, m->out_scale_n);
    memcpy(dydt, in, dim * sizeof(double));
}

clnode_status clnode_model_eval_inputs(clnode_context *ctx, const clnode_model *m, size_t n,
                                       const double *y, const double *t, const double *c,
                                       double *dydt)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, m && (y || !n) && (dydt || !n), CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_model_eval: NULL model or array");
    CLN_CHECK(ctx, !m->time_input || t || !n, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_model_eval: the model takes time as an input but t is NULL");
    CLN_CHECK(ctx, m->num_inputs == 0 || c || !n, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_model_eval: the model takes %zu conditioning inputs but c is NULL",
              m->num_inputs);
    size_t maxw = 0;
    for (size_t l = 0; l <= m->num_layers; ++l)
        if (m->sizes[l] > maxw)
            maxw = m->sizes[l];
    double *h = malloc(2 * maxw * sizeof(double));
    CLN_CHECK(ctx, h, CLNODE_ERR_OUT_OF_MEMORY, "cannot allocate %zu values", 2 * maxw);
    const size_t dim = m->sizes[m->num_layers], k = m->num_inputs;
    const size_t tc = m->time_input ? 1 : 0;
    for (size_t p = 0; p < n; ++p) {
        memcpy(h, y + p * dim, dim * sizeof(double));
        if (tc)
            h[dim] = t[p];
        if (k)
            memcpy(h + dim + tc, c + p * k, k * sizeof(double));
        cln_eval_point(m, maxw, h, dydt + p * dim);
    }
    free(h);
    return CLNODE_OK;
}

clnode_status clnode_model_eval(clnode_context *ctx, const clnode_model *m, size_t n,
                                const double *y, const double *t, double *dydt)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, !m || m->num_inputs == 0, CLNODE_ERR_UNSUPPORTED,
              "clnode_model_eval: the model takes %zu conditioning inputs, which this function "
              "does not pass (clnode_model_eval_inputs does)",
              m->num_inputs);
    return clnode_model_eval_inputs(ctx, m, n, y, t, NULL, dydt);
}

const double *clnode_model_out_scale(const clnode_model *m, size_t *n)
{
    if (n)
        *n = m ? m->out_scale_n : 0;
    return m ? m->out_scale : NULL;
}

const char *clnode_model_out_scale_dtype(const clnode_model *m)
{
    if (!m || !m->out_scale)
        return NULL;
    return m->out_scale_f32 ? "F32" : "F64";
}

size_t clnode_model_num_inputs(const clnode_model *m)
{
    return m->num_inputs;
}

size_t clnode_model_metadata_count(const clnode_model *m)
{
    return m ? m->num_meta : 0;
}

const char *clnode_model_metadata_key(const clnode_model *m, size_t i)
{
    return m && i < m->num_meta ? m->meta[2 * i] : NULL;
}

const char *clnode_model_metadata_value(const clnode_model *m, size_t i)
{
    return m && i < m->num_meta ? m->meta[2 * i + 1] : NULL;
}

const char *clnode_model_tensor_dtype(const clnode_model *m, size_t i, int bias)
{
    if (!m || i >= m->num_layers || (bias && !m->biases[i]))
        return NULL;
    return (bias ? m->bias_f32[i] : m->weight_f32[i]) ? "F32" : "F64";
}
