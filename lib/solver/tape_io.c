/* tape_io.c - a kept solution as bytes and back (clnode_solution_tape_export and
 * clnode_solution_tape_import, clnode/gradient.h): the layout of doc/gradient.md, "The tape as
 * bytes", walked by one function in both directions (cln_tio_body), so that it is stated once. */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "cln_layout.h"
#include "core/fpenv.h"
#include "core/internal.h"
#include "model/model.h"
#include "solver/solution.h"
#include "solver/tape.h"

#define CLN_TAPE_MAGIC "CLNTAPE" /* 8 bytes with its NUL */
#define CLN_TAPE_ENDIAN 0x01020304u
#define CLN_TAPE_CHECKED 32 /* the checksum covers the bytes from here to the end */

typedef CLN_CONSTS_STRUCT(double) cln_tio_consts;
enum {
    CLN_TIO_NK = sizeof(cln_tio_consts) / sizeof(double)
};
enum {
    CLN_TIO_NKI = sizeof(cln_iconsts) / sizeof(int)
};
enum {
    CLN_TIO_FIRST_TS = 4
}; /* the bit of `saved` that says first_ts is present */

/* The header's fields (doc/gradient.md lists them in this order). */
typedef struct cln_tio_head {
    char magic[8];
    uint32_t version, endian;
    uint64_t total, checksum;
    uint32_t precision, esize, gemm_mode;
    int32_t tf32_kind;
    char backend[16];
    uint64_t B, N, n_in, n_ts, every, ts_per_traj, ntau, nys;
    uint64_t model_hash;
    double dir;
    int64_t syncs;
    uint64_t cap[4];
    uint32_t saved, nK, nKI, reserved;
} cln_tio_head;

/* A walk over the layout: writing into `out`, reading from `in`, or only counting (both NULL).
 * `bad` is set when a size overflows (the walk then stops moving). */
typedef struct cln_tio {
    unsigned char *out;
    const unsigned char *in;
    size_t at;
    int bad;
} cln_tio;

/* n bytes of p into the buffer or out of it. */
static void cln_tio_copy(cln_tio *io, void *p, size_t n)
{
    size_t end;
    if (io->bad || !cln_add_size(io->at, n, &end) || end > (size_t)-1 - 8) {
        io->bad = 1;
        return;
    }
    if (io->out && n)
        memcpy(io->out + io->at, p, n);
    else if (io->in && n)
        memcpy(p, io->in + io->at, n);
    io->at = end;
}

/* Zeros up to a multiple of 8 bytes (every array begins at one). */
static void cln_tio_pad(cln_tio *io)
{
    for (; !io->bad && io->at % 8; ++io->at)
        if (io->out)
            io->out[io->at] = 0;
}

/* An array of a x b x c elements of `size` bytes (p may be NULL when it is empty). */
static void cln_tio_array(cln_tio *io, void *p, size_t size, size_t a, size_t b, size_t c)
{
    size_t n;
    if (!cln_mul_size(a, b, &n) || !cln_mul_size(n, c, &n) || !cln_mul_size(n, size, &n))
        io->bad = 1;
    cln_tio_copy(io, p, io->bad ? 0 : n);
    cln_tio_pad(io);
}

/* n sizes, as 64-bit unsigned integers (a value beyond size_t read as SIZE_MAX, which the
 * checks refuse). */
static void cln_tio_sizes(cln_tio *io, size_t *p, size_t n)
{
    if (!io->in && !io->out) { /* counting: n words, without a loop over them */
        cln_tio_array(io, NULL, sizeof(uint64_t), n, 1, 1);
        return;
    }
    for (size_t i = 0; i < n && !io->bad; ++i) {
        uint64_t v = p ? (uint64_t)p[i] : 0;
        cln_tio_copy(io, &v, sizeof v);
        if (io->in && p)
            p[i] = v > (uint64_t)SIZE_MAX ? SIZE_MAX : (size_t)v;
    }
}

/* The header, field by field. */
static void cln_tio_header(cln_tio *io, cln_tio_head *h)
{
#define CLN_TIO_FIELD(f) cln_tio_copy(io, &h->f, sizeof h->f)
    CLN_TIO_FIELD(magic);
    CLN_TIO_FIELD(version);
    CLN_TIO_FIELD(endian);
    CLN_TIO_FIELD(total);
    CLN_TIO_FIELD(checksum);
    CLN_TIO_FIELD(precision);
    CLN_TIO_FIELD(esize);
    CLN_TIO_FIELD(gemm_mode);
    CLN_TIO_FIELD(tf32_kind);
    CLN_TIO_FIELD(backend);
    CLN_TIO_FIELD(B);
    CLN_TIO_FIELD(N);
    CLN_TIO_FIELD(n_in);
    CLN_TIO_FIELD(n_ts);
    CLN_TIO_FIELD(every);
    CLN_TIO_FIELD(ts_per_traj);
    CLN_TIO_FIELD(ntau);
    CLN_TIO_FIELD(nys);
    CLN_TIO_FIELD(model_hash);
    CLN_TIO_FIELD(dir);
    CLN_TIO_FIELD(syncs);
    CLN_TIO_FIELD(cap);
    CLN_TIO_FIELD(saved);
    CLN_TIO_FIELD(nK);
    CLN_TIO_FIELD(nKI);
    CLN_TIO_FIELD(reserved);
#undef CLN_TIO_FIELD
}

/* The trajectories' statistics: 7 values of 8 bytes each. */
static void cln_tio_stats(cln_tio *io, clnode_trajectory_stats *s, size_t B)
{
    for (size_t b = 0; b < B && !io->bad; ++b) {
        int64_t v[5] = {s[b].result, s[b].num_steps, s[b].num_accepted, s[b].num_rejected,
                        s[b].num_rhs_evals};
        cln_tio_copy(io, v, sizeof v);
        cln_tio_copy(io, &s[b].t_final, sizeof(double));
        cln_tio_copy(io, &s[b].first_step, sizeof(double));
        if (io->in) {
            s[b].struct_size = sizeof s[b];
            s[b].result = v[0] >= 0 && (uint64_t)v[0] < clnode_result_count()
                              ? (clnode_result)v[0]
                              : (clnode_result)-1; /* refused by the checks */
            s[b].num_steps = (long)v[1];
            s[b].num_accepted = (long)v[2];
            s[b].num_rejected = (long)v[3];
            s[b].num_rhs_evals = (long)v[4];
        }
    }
}

/* Everything after the header: the solve's constants, the solution's statistics, counts of saved
 * points and the times of those the tape does not hold, then the tape's arrays. Not in the bytes
 * (layout version 2): the saved values and final states, which the reverse and tangent passes
 * never read (an imported solution has none: clnode/gradient.h), and the save times' row
 * (cln_tio_ts_rows makes it again from the tape's own save times, bit for bit). */
static void cln_tio_body(cln_tio *io, const cln_tio_head *h, clnode_solution *s)
{
    cln_tape *t = s ? s->tape : NULL;
    const size_t B = (size_t)h->B, N = (size_t)h->N, es = h->esize;
    cln_tio_array(io, t ? t->K : NULL, sizeof(double), h->nK, 1, 1);
    cln_tio_array(io, t ? &t->KI : NULL, sizeof(int), h->nKI, 1, 1);
    if (s)
        cln_tio_stats(io, s->stats, B);
    else
        cln_tio_array(io, NULL, 7 * 8, B, 1, 1);
    for (int k = 0; k < 4; ++k) {
        if (!(h->saved >> k & 1))
            continue;
        cln_tio_sizes(io, s ? s->count[k] : NULL, B);
        if (k != CLNODE_SAVE_TS)
            cln_tio_array(io, s ? s->ts[k] : NULL, sizeof(double), B, (size_t)h->cap[k], 1);
    }
    if (h->saved >> CLN_TIO_FIRST_TS & 1)
        cln_tio_sizes(io, s ? s->first_ts : NULL, B);
    cln_tio_sizes(io, t ? t->off_t : NULL, B + 1);
    cln_tio_sizes(io, t ? t->off_y : NULL, B + 1);
    cln_tio_array(io, t ? t->tau : NULL, es, h->ntau, 1, 1);
    cln_tio_array(io, t ? t->ys : NULL, es, h->nys, N, 1);
    cln_tio_array(io, t ? t->inputs : NULL, es, B, h->n_in, 1);
    cln_tio_array(io, t ? t->ts : NULL, es, h->ts_per_traj ? B : 1, h->n_ts, 1);
}

/* An imported solution's save times, trajectory by trajectory (B x n_ts doubles), from the tape's
 * own (the direction times each time rounded to the state precision, esize bytes: exact in it):
 * the solve's row, each time rounded to the state precision (solver_save.c), bit for bit. */
static void cln_tio_ts_rows(clnode_solution *s)
{
    const cln_tape *t = s->tape;
    const size_t nt = t->n_ts;
    for (size_t b = 0; b < s->B && s->ts[CLNODE_SAVE_TS]; ++b)
        for (size_t j = 0; j < nt; ++j) {
            const size_t i = (t->ts_per_traj ? b * nt : 0) + j;
            double v;
            if (t->esize == sizeof(float)) {
                float f;
                memcpy(&f, (const unsigned char *)t->ts + i * sizeof f, sizeof f);
                v = (double)f;
            } else {
                memcpy(&v, (const unsigned char *)t->ts + i * sizeof v, sizeof v);
            }
            s->ts[CLNODE_SAVE_TS][b * nt + j] = s->dir * v;
        }
}

/* A 64-bit hash of n bytes (doc/gradient.md): four lanes, word i of 8 bytes into lane i mod 4 by
 * an FNV-1a step and a shift that spreads its high bits down (independent lanes: four words in
 * flight), then the lanes and the bytes past the last group of four words folded in order. */
static uint64_t cln_tio_hash(uint64_t h, const void *p, size_t n)
{
    const uint64_t prime = 1099511628211ull;
    const unsigned char *c = p;
    uint64_t lane[4] = {h, h ^ 1, h ^ 2, h ^ 3};
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int l = 0; l < 4; ++l) {
            uint64_t w;
            memcpy(&w, c + i + 8 * (size_t)l, 8);
            lane[l] = (lane[l] ^ w) * prime;
            lane[l] ^= lane[l] >> 29;
        }
    h = lane[0];
    for (int l = 1; l < 4; ++l)
        h = (h ^ lane[l]) * prime;
    for (; i < n; ++i)
        h = (h ^ c[i]) * prime;
    return h;
}

/* The model's fingerprint: its form and the bits of every parameter. */
static uint64_t cln_tio_model_hash(const clnode_model *m)
{
    uint64_t form[6] = {
        m->num_layers,           (uint64_t)m->activation, (uint64_t)m->final_activation,
        (uint64_t)m->time_input, m->num_inputs,           m->out_scale_n};
    uint64_t h = cln_tio_hash(1469598103934665603ull, form, sizeof form);
    h = cln_tio_hash(h, m->sizes, (m->num_layers + 1) * sizeof m->sizes[0]);
    for (size_t l = 0; l < m->num_layers; ++l) {
        const uint64_t has_bias = m->biases[l] != NULL;
        h = cln_tio_hash(h, &has_bias, sizeof has_bias);
        h = cln_tio_hash(h, m->weights[l], m->sizes[l] * m->sizes[l + 1] * sizeof(double));
        if (m->biases[l])
            h = cln_tio_hash(h, m->biases[l], m->sizes[l + 1] * sizeof(double));
    }
    return m->out_scale ? cln_tio_hash(h, m->out_scale, m->out_scale_n * sizeof(double)) : h;
}

/* The header of a kept solution's tape, its total, model fingerprint and checksum left for
 * later. */
static void cln_tio_head_of(const clnode_solution *s, cln_tio_head *h)
{
    const cln_tape *t = s->tape;
    memset(h, 0, sizeof *h);
    memcpy(h->magic, CLN_TAPE_MAGIC, sizeof h->magic);
    h->version = CLNODE_TAPE_VERSION;
    h->endian = CLN_TAPE_ENDIAN;
    h->precision = (uint32_t)t->prec;
    h->esize = (uint32_t)t->esize;
    h->gemm_mode = (uint32_t)t->gemm_mode;
    h->tf32_kind = t->tf32_kind;
    memcpy(h->backend, t->backend, sizeof h->backend);
    h->B = t->B;
    h->N = t->N;
    h->n_in = t->n_in;
    h->n_ts = t->n_ts;
    h->every = t->every;
    h->ts_per_traj = (uint64_t)t->ts_per_traj;
    h->ntau = t->off_t[t->B];
    h->nys = t->off_y[t->B];
    h->dir = s->dir;
    h->syncs = s->syncs;
    for (int k = 0; k < 4; ++k) {
        h->cap[k] = s->cap[k];
        h->saved |= (uint32_t)(s->count[k] != NULL) << k;
    }
    h->saved |= (uint32_t)(s->first_ts != NULL) << CLN_TIO_FIRST_TS;
    h->nK = CLN_TIO_NK;
    h->nKI = CLN_TIO_NKI;
}

/* The bytes the layout of header h takes (0: it overflows). */
static size_t cln_tio_total(const cln_tio_head *h)
{
    cln_tio io = {NULL, NULL, 0, 0};
    cln_tio_head copy = *h;
    cln_tio_header(&io, &copy);
    cln_tio_body(&io, h, NULL);
    return io.bad ? 0 : io.at;
}

clnode_status clnode_solution_tape_export(clnode_context *ctx, const clnode_model *model,
                                          const clnode_solution *sol, void *buf, size_t size,
                                          size_t *needed)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, model && sol && needed, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_solution_tape_export: model, sol and needed must not be NULL");
    *needed = 0;
    const clnode_status st = cln_tape_check(ctx, "clnode_solution_tape_export", model, sol);
    if (st != CLNODE_OK)
        return st;
    cln_tio_head h;
    cln_tio_head_of(sol, &h);
    const size_t total = cln_tio_total(&h);
    CLN_CHECK(ctx, total, CLNODE_ERR_OUT_OF_MEMORY,
              "clnode_solution_tape_export: the tape of %zu trajectories overflows size_t", sol->B);
    *needed = total;
    if (!buf)
        return CLNODE_OK;
    CLN_CHECK(ctx, size >= total, CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_solution_tape_export: the buffer of %zu bytes is smaller than the tape's "
              "%zu bytes",
              size, total);
    h.total = total;
    h.model_hash = cln_tio_model_hash(model);
    cln_tio io = {buf, NULL, 0, 0};
    cln_tio_header(&io, &h);
    cln_tio_body(&io, &h, (clnode_solution *)sol); /* read only: the walk writes into buf */
    h.checksum = cln_tio_hash(1469598103934665603ull, (unsigned char *)buf + CLN_TAPE_CHECKED,
                              total - CLN_TAPE_CHECKED);
    memcpy((unsigned char *)buf + 24, &h.checksum, sizeof h.checksum);
    return CLNODE_OK;
}

/* ---- import ---- */

#define CLN_TIO_BAD(ctx, ...)                                                                      \
    cln_fail((ctx), CLNODE_ERR_INVALID_ARGUMENT, "clnode_solution_tape_import: " __VA_ARGS__)

/* The header's own checks: what it says about the bytes and the sizes, before any of them is
 * read. */
static clnode_status cln_tio_check_head(clnode_context *ctx, const cln_tio_head *h, size_t size,
                                        const clnode_model *m)
{
    if (memcmp(h->magic, CLN_TAPE_MAGIC, sizeof h->magic) != 0)
        return CLN_TIO_BAD(ctx, "the buffer is not a clnode tape (it does not begin with the "
                                "magic \"" CLN_TAPE_MAGIC "\")");
    if (h->endian != CLN_TAPE_ENDIAN)
        return CLN_TIO_BAD(ctx,
                           "the tape was written in the other byte order (endian mark "
                           "0x%08x, this machine's is 0x%08x)",
                           h->endian, CLN_TAPE_ENDIAN);
    if (h->version != CLNODE_TAPE_VERSION)
        return CLN_TIO_BAD(ctx, "the tape's layout is version %u, this library reads version %d",
                           h->version, CLNODE_TAPE_VERSION);
    if (h->total > size)
        return CLN_TIO_BAD(ctx,
                           "the buffer holds %zu bytes, the tape's header says %llu: it is "
                           "short (truncated)",
                           size, (unsigned long long)h->total);
    if (h->nK != CLN_TIO_NK || h->nKI != CLN_TIO_NKI)
        return CLN_TIO_BAD(ctx,
                           "the tape holds %u real and %u integer solver constants, this "
                           "library %d and %d (another build's layout)",
                           h->nK, h->nKI, CLN_TIO_NK, CLN_TIO_NKI);
    const int fp32 = h->precision == CLNODE_FP32 && h->esize == sizeof(float);
    const int fp64 = h->precision == CLNODE_FP64 && h->esize == sizeof(double);
    if (!fp32 && !fp64)
        return CLN_TIO_BAD(ctx,
                           "the tape's precision %u with %u-byte values is not fp32 (32, 4) "
                           "or fp64 (64, 8)",
                           h->precision, h->esize);
    if (h->gemm_mode > CLNODE_GEMM_TF32 || (h->gemm_mode == CLNODE_GEMM_TF32 && !fp32) ||
        (h->tf32_kind != CLN_TF32_EMULATED && h->tf32_kind != CLN_TF32_TENSOR_CORES))
        return CLN_TIO_BAD(ctx, "the tape's GEMM mode %u (tf32 kind %d) is not one of the solver's",
                           h->gemm_mode, h->tf32_kind);
    if (memchr(h->backend, 0, sizeof h->backend) == NULL)
        return CLN_TIO_BAD(ctx, "the tape's backend name is not terminated");
    if (h->B < 1 || h->B > INT_MAX || h->N != clnode_model_dim(m) || h->n_in != m->num_inputs ||
        h->every < 1 || h->ts_per_traj > 1 || h->n_ts > INT_MAX ||
        (h->dir != 1.0 && h->dir != -1.0))
        return CLN_TIO_BAD(ctx,
                           "the tape's sizes (batch %llu, dim %llu, %llu inputs, checkpoint_every "
                           "%llu, %llu save times, direction %g) do not fit the model (dim %zu, "
                           "%zu inputs) or the solver's bounds",
                           (unsigned long long)h->B, (unsigned long long)h->N,
                           (unsigned long long)h->n_in, (unsigned long long)h->every,
                           (unsigned long long)h->n_ts, h->dir, clnode_model_dim(m), m->num_inputs);
    if (h->model_hash != cln_tio_model_hash(m))
        return CLN_TIO_BAD(ctx, "the model is not the one the tape was solved with (its layers, "
                                "activations or parameters differ)");
    const uint32_t ts_saved = h->saved >> CLNODE_SAVE_TS & 1;
    if (h->saved >> (CLN_TIO_FIRST_TS + 1) || h->cap[CLNODE_SAVE_T0] > 1 ||
        h->cap[CLNODE_SAVE_T1] > 1 || h->cap[CLNODE_SAVE_TS] != (ts_saved ? h->n_ts : 0) ||
        (h->saved >> CLN_TIO_FIRST_TS & 1) != (h->cap[CLNODE_SAVE_TS] != 0) ||
        (!ts_saved && h->n_ts != 0))
        return CLN_TIO_BAD(ctx,
                           "the tape's saved points (kinds 0x%x, capacities %llu %llu %llu "
                           "%llu) are not a solution's",
                           h->saved, (unsigned long long)h->cap[0], (unsigned long long)h->cap[1],
                           (unsigned long long)h->cap[2], (unsigned long long)h->cap[3]);
    for (int k = 0; k < 4; ++k)
        if (h->cap[k] && !(h->saved >> k & 1))
            return CLN_TIO_BAD(ctx, "the tape holds points of kind %d without their counts", k);
    const size_t total = cln_tio_total(h);
    if (!total || total != h->total)
        return CLN_TIO_BAD(ctx,
                           "the tape's header says %llu bytes, its sizes make %zu: the header "
                           "is corrupt",
                           (unsigned long long)h->total, total);
    return CLNODE_OK;
}

/* The solution of header h with every array allocated (the tape's too), zeroed; NULL when out of
 * memory. */
static clnode_solution *cln_tio_alloc(const cln_tio_head *h)
{
    const size_t B = (size_t)h->B, N = (size_t)h->N, es = h->esize;
    clnode_solution *s = calloc(1, sizeof *s);
    cln_tape *t = calloc(1, sizeof *t);
    if (!s || !t) {
        free(s);
        free(t);
        return NULL;
    }
    s->tape = t;
    s->B = B;
    s->N = N;
    /* the sizes were checked against the total, which fits in the buffer: no product overflows */
    s->stats = calloc(B, sizeof *s->stats);
    int ok = s->stats != NULL;
    /* no saved values or final states (y_final and ys stay NULL: not in the tape) */
    for (int k = 0; k < 4 && ok; ++k) {
        s->cap[k] = (size_t)h->cap[k];
        if (!(h->saved >> k & 1))
            continue;
        s->count[k] = calloc(B, sizeof(size_t));
        ok = s->count[k] != NULL;
        if (ok && s->cap[k])
            ok = (s->ts[k] = calloc(B * s->cap[k], sizeof(double))) != NULL;
    }
    if (ok && h->saved >> CLN_TIO_FIRST_TS & 1)
        ok = (s->first_ts = calloc(B, sizeof(size_t))) != NULL;
    t->off_t = calloc(B + 1, sizeof(size_t));
    t->off_y = calloc(B + 1, sizeof(size_t));
    t->tau = calloc(h->ntau ? (size_t)h->ntau : 1, es);
    t->ys = calloc(h->nys ? (size_t)(h->nys * N) : 1, es);
    t->inputs = h->n_in ? calloc(B * (size_t)h->n_in, es) : NULL;
    t->ts = h->n_ts ? calloc((h->ts_per_traj ? B : 1) * (size_t)h->n_ts, es) : NULL;
    ok = ok && t->off_t && t->off_y && t->tau && t->ys && (!h->n_in || t->inputs) &&
         (!h->n_ts || t->ts);
    if (!ok)
        clnode_solution_destroy(&s);
    return s;
}

/* The integer constants the reverse pass indexes with, against the header and the model. */
static clnode_status cln_tio_check_ki(clnode_context *ctx, const cln_tio_head *h,
                                      const cln_iconsts *KI, const clnode_model *m)
{
    const size_t ldz = (size_t)h->N + (size_t)(m->time_input != 0) + (size_t)h->n_in;
    if ((size_t)KI->N != h->N || KI->N < 1 || (size_t)KI->ldz != ldz || KI->stages < 1 ||
        KI->stages > CLN_MAX_STAGES || (unsigned)KI->fsal > 1 || (unsigned)KI->ssal > 1 ||
        (unsigned)KI->adaptive > 1 || KI->dense_form < CLN_DENSE_LINEAR ||
        KI->dense_form > CLN_DENSE_POLYNOMIAL || (size_t)KI->n_ts != h->n_ts ||
        KI->ts_stride != (h->ts_per_traj ? KI->n_ts : 0) ||
        KI->time_input != (m->time_input != 0) || KI->dt0_order < 1)
        return CLN_TIO_BAD(ctx,
                           "the tape's solver constants (dim %d, row %d, %d stages, "
                           "interpolation %d, %d save times) do not fit its header or "
                           "the model",
                           KI->N, KI->ldz, KI->stages, KI->dense_form, KI->n_ts);
    return CLNODE_OK;
}

/* The offsets of every trajectory's steps and kept states, its counts of saved points and its
 * statistics: what the reverse pass and the layout index with. */
static clnode_status cln_tio_check_rows(clnode_context *ctx, const cln_tio_head *h,
                                        const clnode_solution *s)
{
    const cln_tape *t = s->tape;
    if (t->off_t[0] != 0 || t->off_y[0] != 0 || t->off_t[s->B] != h->ntau ||
        t->off_y[s->B] != h->nys)
        return CLN_TIO_BAD(ctx,
                           "the tape's step offsets do not span its %llu times and %llu "
                           "kept states",
                           (unsigned long long)h->ntau, (unsigned long long)h->nys);
    for (size_t b = 0; b < s->B; ++b) {
        if (t->off_t[b + 1] <= t->off_t[b] || t->off_t[b + 1] > h->ntau ||
            t->off_y[b + 1] < t->off_y[b])
            return CLN_TIO_BAD(ctx, "the step offsets of trajectory %zu are not increasing", b);
        const size_t M = t->off_t[b + 1] - t->off_t[b] - 1;
        if (t->off_y[b + 1] - t->off_y[b] != M / t->every + (M % t->every != 0))
            return CLN_TIO_BAD(ctx,
                               "trajectory %zu keeps %zu states for %zu steps at "
                               "checkpoint_every %zu",
                               b, t->off_y[b + 1] - t->off_y[b], M, t->every);
        const size_t first = s->first_ts ? s->first_ts[b] : 0;
        for (int k = 0; k < 4; ++k) {
            const size_t n = s->count[k] ? s->count[k][b] : 0;
            const size_t from = k == CLNODE_SAVE_TS ? first : 0, cap = s->cap[k];
            if (from > cap || n > cap - from || (k == CLNODE_SAVE_STEPS && s->count[k] && n != M))
                return CLN_TIO_BAD(ctx,
                                   "trajectory %zu counts %zu saved points of kind %d (room "
                                   "for %zu, %zu steps)",
                                   b, n, k, cap, M);
        }
        if ((unsigned)s->stats[b].result >= clnode_result_count())
            return CLN_TIO_BAD(ctx, "trajectory %zu has no valid result code", b);
    }
    return CLNODE_OK;
}

clnode_status clnode_solution_tape_import(clnode_context *ctx, const clnode_model *model,
                                          const void *buf, size_t size, clnode_solution **out)
{
    CLN_FPENV_SCOPE; /* IEEE arithmetic whatever the caller set (core/fpenv.h) */
    cln_clear_error(ctx);
    CLN_CHECK(ctx, model && out && (buf || !size), CLNODE_ERR_INVALID_ARGUMENT,
              "clnode_solution_tape_import: model and out must not be NULL, nor buf with a size");
    *out = NULL;
    cln_tio_head h;
    cln_tio io = {NULL, buf, 0, 0};
    memset(&h, 0, sizeof h);
    {
        cln_tio count = {NULL, NULL, 0, 0};
        cln_tio_header(&count, &h);
        if (size < count.at)
            return CLN_TIO_BAD(ctx,
                               "the buffer holds %zu bytes, less than the tape's header (%zu "
                               "bytes): it is short",
                               size, count.at);
    }
    cln_tio_header(&io, &h);
    clnode_status st = cln_tio_check_head(ctx, &h, size, model);
    if (st != CLNODE_OK)
        return st;
    const uint64_t sum =
        cln_tio_hash(1469598103934665603ull, (const unsigned char *)buf + CLN_TAPE_CHECKED,
                     (size_t)h.total - CLN_TAPE_CHECKED);
    if (sum != h.checksum)
        return CLN_TIO_BAD(ctx, "the tape's checksum does not match its bytes: they were changed "
                                "after the export (corrupt)");
    clnode_solution *s = cln_tio_alloc(&h);
    CLN_CHECK(ctx, s, CLNODE_ERR_OUT_OF_MEMORY,
              "clnode_solution_tape_import: cannot allocate the solution of %llu trajectories",
              (unsigned long long)h.B);
    cln_tio_body(&io, &h, s);
    cln_tape *t = s->tape;
    s->dir = h.dir;
    s->syncs = (long)h.syncs;
    t->prec = (clnode_precision)h.precision;
    t->gemm_mode = (clnode_gemm_mode)h.gemm_mode;
    t->esize = h.esize;
    t->model = model;
    t->model_serial = model->serial;
    memcpy(t->backend, h.backend, sizeof t->backend);
    t->tf32_kind = h.tf32_kind;
    t->B = s->B;
    t->N = s->N;
    t->n_in = (size_t)h.n_in;
    t->n_ts = (size_t)h.n_ts;
    t->every = (size_t)h.every;
    t->ts_per_traj = (int)h.ts_per_traj;
    st = cln_tio_check_ki(ctx, &h, &t->KI, model);
    if (st == CLNODE_OK)
        st = cln_tio_check_rows(ctx, &h, s);
    if (st == CLNODE_OK)
        cln_tio_ts_rows(s);
    if (st == CLNODE_OK && !cln_tape_bytes(t, &t->bytes))
        st = CLN_TIO_BAD(ctx, "the tape's size overflows");
    if (st == CLNODE_OK && !cln_tape_ts_steps(t, s->first_ts, s->count[CLNODE_SAVE_TS]))
        st = cln_fail(ctx, CLNODE_ERR_OUT_OF_MEMORY,
                      "clnode_solution_tape_import: cannot allocate the saved times' steps");
    if (st != CLNODE_OK) {
        clnode_solution_destroy(&s);
        return st;
    }
    *out = s;
    return CLNODE_OK;
}
