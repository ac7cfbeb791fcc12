/* solve_arrays.c - clnode-solve's .npy/.npz inputs and outputs (solve_arrays.h). */
#include "solve_arrays.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "npz.h"
#include "tool_common.h"

/* ---- inputs ---- */

enum {
    ARR_Y0,
    ARR_T0,
    ARR_T1,
    ARR_DT0,
    ARR_ARGS,
    ARR_COUNT
};
static const char *const arr_names[ARR_COUNT] = {"y0", "t0", "t1", "dt0", "args"};

static const char *shape_str(char *buf, size_t cap, const cln_npy_header *h)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (size_t d = 0; d < h->ndim && n < cap; ++d)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %zu" : "%zu", h->shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, h->ndim == 1 ? ",)" : ")");
    return buf;
}

/* Checks array `which` (its .npy image `img` of `size` bytes, from `src`: a file name, or "FILE
 * member NAME") and stores its values. Returns 0, 2 or 3 after an error. */
static int take(solve_arrays *s, int which, const char *src, const unsigned char *img, size_t size,
                size_t N, size_t k)
{
    cln_npy_header h;
    char err[256], sh[128];
    if (cln_npy_parse(img, size, &h, err, sizeof err)) {
        tool_error("%s: %s", src, err);
        return TOOL_EXIT_INPUT;
    }
    size_t rows;
    if (which == ARR_Y0) {
        if (h.ndim == 1 && h.shape[0] == N) {
            rows = 1;
        } else if (h.ndim == 2 && h.shape[1] == N) {
            rows = h.shape[0];
        } else {
            tool_error("%s: y0 of shape %s, but the model's state has %zu components: (B, %zu) "
                       "or (%zu,) expected",
                       src, shape_str(sh, sizeof sh, &h), N, N, N);
            return TOOL_EXIT_INPUT;
        }
    } else if (which == ARR_ARGS) {
        if (k == 0) {
            tool_error("%s: the model takes no conditioning inputs (its metadata has no "
                       "\"inputs\"), but args are given",
                       src);
            return TOOL_EXIT_INPUT;
        }
        if (h.ndim != 2 || h.shape[1] != k) {
            tool_error("%s: args of shape %s, but the model takes %zu conditioning inputs: "
                       "(B, %zu) expected",
                       src, shape_str(sh, sizeof sh, &h), k, k);
            return TOOL_EXIT_INPUT;
        }
        rows = h.shape[0];
    } else {
        if (h.ndim != 1) {
            tool_error("%s: %s of shape %s: one value per trajectory, (B,), expected", src,
                       arr_names[which], shape_str(sh, sizeof sh, &h));
            return TOOL_EXIT_INPUT;
        }
        rows = h.shape[0];
    }
    if (rows == 0) {
        tool_error("%s: %s holds no trajectory", src, arr_names[which]);
        return TOOL_EXIT_INPUT;
    }
    if (s->batch && rows != s->batch) {
        tool_error("%s: %s holds %zu trajectories, but %s holds %zu", src, arr_names[which], rows,
                   s->batch_src, s->batch);
        return TOOL_EXIT_INPUT;
    }
    double *v = malloc(h.count * sizeof(double));
    if (!v) {
        tool_error("%s: out of memory", src);
        return TOOL_EXIT_RESOURCE;
    }
    cln_npy_decode(img, &h, v);
    const size_t per = h.count / rows;
    for (size_t i = 0; i < h.count; ++i)
        if (!isfinite(v[i])) {
            if (per == 1)
                tool_error("%s: %s[%zu] is %g: every value must be finite", src, arr_names[which],
                           i, v[i]);
            else
                tool_error("%s: %s[%zu][%zu] is %g: every value must be finite", src,
                           arr_names[which], i / per, i % per, v[i]);
            free(v);
            return TOOL_EXIT_INPUT;
        }
    double **dst[ARR_COUNT] = {&s->y0, &s->t0s, &s->t1s, &s->dt0s, &s->inputs};
    *dst[which] = v;
    if (!s->batch) {
        s->batch = rows;
        snprintf(s->batch_src, sizeof s->batch_src, "%.200s", src);
    }
    return 0;
}

static int read_whole(const char *path, unsigned char **buf, size_t *len)
{
    char *text = NULL;
    const int rc = tool_read_file(path, &text, len);
    *buf = (unsigned char *)text;
    return rc;
}

int solve_arrays_load(const solve_args *a, size_t N, size_t k, solve_arrays *s)
{
    memset(s, 0, sizeof *s);
    const char *files[ARR_COUNT] = {NULL, a->t0_file, a->t1_file, a->dt0_file, a->args_file};
    int rc = 0;
    for (int w = ARR_T0; w < ARR_COUNT && !rc; ++w) {
        if (!files[w])
            continue;
        unsigned char *img = NULL;
        size_t len = 0;
        if ((rc = read_whole(files[w], &img, &len)) == 0)
            rc = take(s, w, files[w], img, len, N, k);
        free(img);
    }
    if (!rc && a->in_path) {
        unsigned char *img = NULL;
        size_t len = 0, n = 0;
        cln_npz_entry e[CLN_NPZ_MAX_MEMBERS];
        char err[256];
        if ((rc = read_whole(a->in_path, &img, &len)) == 0 &&
            cln_npz_parse(img, len, e, &n, err, sizeof err) != 0) {
            tool_error("%s: %s", a->in_path, err);
            rc = TOOL_EXIT_INPUT;
        }
        for (size_t i = 0; i < n && !rc; ++i) {
            int w = 0;
            while (w < ARR_COUNT && strcmp(e[i].name, arr_names[w]) != 0)
                ++w;
            char src[256];
            snprintf(src, sizeof src, "%.200s member %.31s", a->in_path, e[i].name);
            if (w == ARR_COUNT) {
                tool_error("%s: unknown member %s.npy (y0, t0, t1, dt0 and args are read)",
                           a->in_path, e[i].name);
                rc = TOOL_EXIT_INPUT;
            } else if (w == ARR_Y0 && (a->pb.y0_file || a->pb.y0)) {
                tool_error("%s: y0 is given twice (the member y0 and %s)", a->in_path,
                           a->pb.y0_file ? "--y0-file" : "--y0");
                rc = TOOL_EXIT_INPUT;
            } else if (w != ARR_Y0 && files[w]) {
                tool_error("%s: %s is given twice (the member %s and --%s-file)", a->in_path,
                           arr_names[w], arr_names[w], arr_names[w]);
                rc = TOOL_EXIT_INPUT;
            } else if ((w == ARR_T0 && a->t0_given) || (w == ARR_T1 && a->t1_given) ||
                       (w == ARR_DT0 && a->dt0_given)) {
                tool_error("%s: %s is given twice (the member %s and --%s)", a->in_path,
                           arr_names[w], arr_names[w], arr_names[w]);
                rc = TOOL_EXIT_INPUT;
            } else if (e[i].size > SIZE_MAX) {
                tool_error("%s: too large", src);
                rc = TOOL_EXIT_RESOURCE;
            } else {
                rc = take(s, w, src, e[i].data, (size_t)e[i].size, N, k);
            }
        }
        free(img);
    }
    if (!rc && k && !s->inputs) {
        tool_error("the model takes %zu conditioning inputs: give them with --args-file "
                   "FILE.npy of shape (B, %zu) or an args member in --in",
                   k, k);
        rc = TOOL_EXIT_INPUT;
    }
    if (rc)
        solve_arrays_free(s);
    return rc;
}

void solve_arrays_free(solve_arrays *s)
{
    free(s->y0);
    free(s->t0s);
    free(s->t1s);
    free(s->dt0s);
    free(s->inputs);
    memset(s, 0, sizeof *s);
}

/* ---- outputs ---- */

/* Each member's row-range CRCs, gathered in row order as a parallel writer would gather them. */
typedef struct crc_list {
    uint64_t *bounds;
    uint32_t *crcs;
    size_t n, cap;
} crc_list;

static int crc_push(crc_list *c, uint64_t r1, uint32_t crc)
{
    if (c->n + 1 >= c->cap) {
        const size_t cap = c->cap ? 2 * c->cap : 16;
        uint64_t *b = realloc(c->bounds, (cap + 1) * sizeof *b);
        if (b)
            c->bounds = b;
        uint32_t *r = realloc(c->crcs, cap * sizeof *r);
        if (r)
            c->crcs = r;
        if (!b || !r)
            return -1;
        if (c->cap == 0)
            c->bounds[0] = 0;
        c->cap = cap;
    }
    c->crcs[c->n++] = crc;
    c->bounds[c->n] = r1;
    return 0;
}

typedef struct out_ctx {
    cln_npz_layout L;
    crc_list crc[CLN_NPZ_MAX_MEMBERS];
    int fd;
    uint64_t shift; /* .npy output: the member's npy header goes to byte 0 */
    char err[256];
} out_ctx;

static int shifted_pwrite(void *user, const void *buf, size_t len, uint64_t offset)
{
    out_ctx *c = user;
    return cln_npz_pwrite_fd(&c->fd, buf, len, offset - c->shift);
}

/* Writes rows [r0, r1) of member `name` (absent from an .npy layout: nothing to do). */
static int put_rows(out_ctx *c, const char *name, uint64_t r0, uint64_t r1, const void *v)
{
    const int m = cln_npz_find(&c->L, name);
    if (m < 0)
        return 0;
    uint32_t crc;
    if (cln_npz_write_rows(&c->L, (size_t)m, r0, r1, v, shifted_pwrite, c, &crc, c->err,
                           sizeof c->err) != 0)
        return -1;
    if (crc_push(&c->crc[m], r1, crc) != 0) {
        snprintf(c->err, sizeof c->err, "out of memory");
        return -1;
    }
    return 0;
}

/* Slot of each saved point of a trajectory in the padded layout: without steps, the requested
 * points in a fixed order ([t0] ts... [t1], absent ones left padded); with steps, the points in
 * time order from slot 0. */
static size_t padded_T(const clnode_solution *sol, const clnode_solve_options *o, double dir_t0,
                       double dir_t1, int *oom)
{
    if (!o->save_steps)
        return (size_t)(o->save_t0 != 0) + o->n_save_ts + (size_t)(o->save_t1 != 0);
    size_t T = 0;
    for (size_t b = 0; b < clnode_solution_batch(sol); ++b) {
        size_t n = 0;
        tool_point *p = tool_sorted_points(sol, b, dir_t0, dir_t1, &n);
        if (!p) {
            *oom = 1;
            return 0;
        }
        free(p);
        T = n > T ? n : T;
    }
    return T;
}

/* The index in save_ts of the first time trajectory b saved (its run is contiguous): the first
 * time that, rounded to the solve's precision, equals the first saved time. */
static size_t first_ts_index(const clnode_solve_options *o, double t)
{
    for (size_t j = 0; j < o->n_save_ts; ++j) {
        const double r = o->precision == CLNODE_FP32 ? (double)(float)o->save_ts[j] : o->save_ts[j];
        if (r == t)
            return j;
    }
    return 0;
}

static int store(void *dst, size_t i, double x, int f4)
{
    if (f4)
        ((float *)dst)[i] = (float)x;
    else
        ((double *)dst)[i] = x;
    return 0;
}

/* Fills rows of trajectories [b0, b1) of the padded ts (rows x T) and ys (rows x T x N). */
static int fill_padded(const clnode_solution *sol, const clnode_solve_options *o, double dir_t0,
                       double dir_t1, size_t b0, size_t b1, size_t T, int f4, void *ts, void *ys)
{
    const size_t N = clnode_solution_dim(sol);
    for (size_t i = 0; i < (b1 - b0) * T; ++i)
        store(ts, i, INFINITY, f4);
    for (size_t i = 0; i < (b1 - b0) * T * N; ++i)
        store(ys, i, INFINITY, f4);
    for (size_t b = b0; b < b1; ++b) {
        size_t n = 0;
        tool_point *p = tool_sorted_points(sol, b, dir_t0, dir_t1, &n);
        if (!p)
            return -1;
        size_t ts_first = 0;
        if (!o->save_steps && o->n_save_ts) {
            size_t nts = 0;
            const double *tts = NULL;
            if (clnode_solution_saved(sol, b, CLNODE_SAVE_TS, &nts, &tts, NULL) == CLNODE_OK && nts)
                ts_first = first_ts_index(o, tts[0]);
        }
        size_t ts_k = 0;
        for (size_t k = 0; k < n && k < T; ++k) {
            size_t slot = k;
            if (!o->save_steps) {
                const size_t base = o->save_t0 != 0;
                slot = p[k].kind == CLNODE_SAVE_T0   ? 0
                       : p[k].kind == CLNODE_SAVE_TS ? base + ts_first + ts_k++
                                                     : base + o->n_save_ts;
                if (slot >= T)
                    continue;
            }
            const size_t row = (b - b0) * T + slot;
            store(ts, row, p[k].t, f4);
            for (size_t j = 0; j < N; ++j)
                store(ys, row * N + j, p[k].y[j], f4);
        }
        free(p);
    }
    return 0;
}

static int write_stats(out_ctx *c, const clnode_solution *sol)
{
    const size_t B = clnode_solution_batch(sol);
    int64_t *v = malloc((B ? B : 1) * sizeof *v);
    int32_t *r = malloc((B ? B : 1) * sizeof *r);
    int rc = -1;
    if (!v || !r) {
        snprintf(c->err, sizeof c->err, "out of memory");
        goto done;
    }
    static const char *const names[3] = {"num_steps", "num_accepted", "num_rejected"};
    for (int k = 0; k < 3; ++k) {
        for (size_t b = 0; b < B; ++b) {
            clnode_trajectory_stats s;
            clnode_solution_stats(sol, b, &s);
            v[b] = k == 0 ? s.num_steps : k == 1 ? s.num_accepted : s.num_rejected;
            r[b] = (int32_t)s.result;
        }
        if (put_rows(c, names[k], 0, B, v) != 0)
            goto done;
    }
    const int64_t version = SOLVE_ARRAYS_FORMAT_VERSION;
    rc = put_rows(c, "result", 0, B, r) || put_rows(c, "format_version", 0, 1, &version) ? -1 : 0;
done:
    free(v);
    free(r);
    return rc;
}

/* Trajectories per piece: about 16 MiB of values, at least one trajectory. */
static size_t piece_rows(size_t per_traj_values)
{
    const size_t per = per_traj_values ? per_traj_values : 1;
    const size_t n = ((size_t)16 << 20) / 8 / per;
    return n ? n : 1;
}

static int write_padded(out_ctx *c, const clnode_solution *sol, const clnode_solve_options *o,
                        double dir_t0, double dir_t1, size_t T, int f4)
{
    const size_t B = clnode_solution_batch(sol), N = clnode_solution_dim(sol);
    const size_t step = piece_rows(T * (N + 1)), isz = f4 ? 4 : 8;
    size_t nts, nys;
    if (!tool_mul_size(step, T, &nts) || !tool_mul_size(nts, N, &nys)) {
        snprintf(c->err, sizeof c->err, "sizes overflow");
        return -1;
    }
    void *ts = malloc(nts ? nts * isz : 1), *ys = malloc(nys ? nys * isz : 1);
    int rc = 0;
    if (!ts || !ys) {
        snprintf(c->err, sizeof c->err, "out of memory");
        rc = -1;
    }
    for (size_t b0 = 0; b0 < B && !rc; b0 += step) {
        const size_t b1 = B - b0 < step ? B : b0 + step;
        if (fill_padded(sol, o, dir_t0, dir_t1, b0, b1, T, f4, ts, ys) != 0) {
            snprintf(c->err, sizeof c->err, "out of memory");
            rc = -1;
        } else if (put_rows(c, "ts", b0, b1, ts) != 0 || put_rows(c, "ys", b0, b1, ys) != 0) {
            rc = -1;
        }
    }
    free(ts);
    free(ys);
    return rc;
}

static int write_ragged(out_ctx *c, const clnode_solution *sol, double dir_t0, double dir_t1,
                        const int64_t *offsets, int f4)
{
    const size_t B = clnode_solution_batch(sol), N = clnode_solution_dim(sol);
    const size_t isz = f4 ? 4 : 8;
    if (put_rows(c, "offsets", 0, B + 1, offsets) != 0)
        return -1;
    /* one trajectory's points at a time, in pieces of trajectories of about 16 MiB */
    size_t cap = 0;
    void *ts = NULL, *ys = NULL;
    int rc = 0;
    for (size_t b0 = 0; b0 < B && !rc;) {
        size_t b1 = b0 + 1;
        while (b1 < B && (size_t)(offsets[b1 + 1] - offsets[b0]) * (N + 1) <= ((size_t)2 << 20))
            ++b1;
        const size_t P = (size_t)(offsets[b1] - offsets[b0]);
        if (P > cap) {
            free(ts);
            free(ys);
            ts = malloc(P * isz);
            ys = malloc(P * N * isz);
            cap = P;
            if (!ts || !ys) {
                snprintf(c->err, sizeof c->err, "out of memory");
                rc = -1;
                break;
            }
        }
        size_t at = 0;
        for (size_t b = b0; b < b1 && !rc; ++b) {
            size_t n = 0;
            tool_point *p = tool_sorted_points(sol, b, dir_t0, dir_t1, &n);
            if (!p) {
                snprintf(c->err, sizeof c->err, "out of memory");
                rc = -1;
                break;
            }
            for (size_t k = 0; k < n; ++k, ++at) {
                store(ts, at, p[k].t, f4);
                for (size_t j = 0; j < N; ++j)
                    store(ys, at * N + j, p[k].y[j], f4);
            }
            free(p);
        }
        if (!rc && (put_rows(c, "ts", (uint64_t)offsets[b0], (uint64_t)offsets[b1], ts) != 0 ||
                    put_rows(c, "ys", (uint64_t)offsets[b0], (uint64_t)offsets[b1], ys) != 0))
            rc = -1;
        b0 = b1;
    }
    free(ts);
    free(ys);
    return rc;
}

int solve_arrays_write(int fd, const char *path, int format, int ragged, const clnode_solution *sol,
                       const clnode_solve_options *o, double dir_t0, double dir_t1)
{
    out_ctx *c = calloc(1, sizeof *c);
    if (!c) {
        tool_error("cannot write %s: out of memory", path);
        return TOOL_EXIT_RESOURCE;
    }
    c->fd = fd;
    const size_t B = clnode_solution_batch(sol), N = clnode_solution_dim(sol);
    const int f4 = o->precision == CLNODE_FP32;
    const cln_npz_dtype ft = f4 ? CLN_NPZ_F4 : CLN_NPZ_F8;
    int64_t *offsets = NULL;
    int oom = 0, rc = -1;
    cln_npz_init(&c->L, CLN_NPZ_ZIP64_THRESHOLD);
    /* layout: every member's shape is known once the solve is done */
    if (ragged) {
        offsets = malloc((B + 1) * sizeof *offsets);
        if (!offsets) {
            snprintf(c->err, sizeof c->err, "out of memory");
            goto done;
        }
        offsets[0] = 0;
        for (size_t b = 0; b < B; ++b) {
            size_t n = 0;
            tool_point *p = tool_sorted_points(sol, b, dir_t0, dir_t1, &n);
            if (!p) {
                snprintf(c->err, sizeof c->err, "out of memory");
                goto done;
            }
            free(p);
            offsets[b + 1] = offsets[b] + (int64_t)n;
        }
        const uint64_t P = (uint64_t)offsets[B];
        if (cln_npz_add(&c->L, "ts", ft, 1, (uint64_t[]){P}, c->err, sizeof c->err) < 0 ||
            cln_npz_add(&c->L, "ys", ft, 2, (uint64_t[]){P, N}, c->err, sizeof c->err) < 0 ||
            cln_npz_add(&c->L, "offsets", CLN_NPZ_I8, 1, (uint64_t[]){B + 1}, c->err,
                        sizeof c->err) < 0)
            goto done;
    } else {
        const size_t T = padded_T(sol, o, dir_t0, dir_t1, &oom);
        if (oom) {
            snprintf(c->err, sizeof c->err, "out of memory");
            goto done;
        }
        if ((format == SOLVE_OUT_NPZ &&
             cln_npz_add(&c->L, "ts", ft, 2, (uint64_t[]){B, T}, c->err, sizeof c->err) < 0) ||
            cln_npz_add(&c->L, "ys", ft, 3, (uint64_t[]){B, T, N}, c->err, sizeof c->err) < 0)
            goto done;
    }
    if (format == SOLVE_OUT_NPZ) {
        static const char *const names[3] = {"num_steps", "num_accepted", "num_rejected"};
        for (int k = 0; k < 3; ++k)
            if (cln_npz_add(&c->L, names[k], CLN_NPZ_I8, 1, (uint64_t[]){B}, c->err,
                            sizeof c->err) < 0)
                goto done;
        if (cln_npz_add(&c->L, "result", CLN_NPZ_I4, 1, (uint64_t[]){B}, c->err, sizeof c->err) <
                0 ||
            cln_npz_add(&c->L, "format_version", CLN_NPZ_I8, 0, NULL, c->err, sizeof c->err) < 0)
            goto done;
    }
    if (cln_npz_plan(&c->L, c->err, sizeof c->err) != 0)
        goto done;
    if (format == SOLVE_OUT_NPY)
        c->shift = c->L.m[0].npy_off;
    /* data, by row ranges, then the CRCs combined in row order, then the headers */
    if ((ragged ? write_ragged(c, sol, dir_t0, dir_t1, offsets, f4)
                : write_padded(c, sol, o, dir_t0, dir_t1,
                               c->L.m[cln_npz_find(&c->L, "ys")].shape[1], f4)) != 0 ||
        (format == SOLVE_OUT_NPZ && write_stats(c, sol) != 0))
        goto done;
    if (format == SOLVE_OUT_NPY) {
        /* a bare .npy: the member's npy header at byte 0, its data after it */
        if (cln_npz_write_npy_header(&c->L, 0, shifted_pwrite, c, c->err, sizeof c->err) != 0)
            goto done;
        rc = 0;
        goto done;
    }
    for (size_t m = 0; m < c->L.n; ++m)
        if (cln_npz_member_crc(&c->L, m, c->crc[m].n, c->crc[m].bounds, c->crc[m].crcs, c->err,
                               sizeof c->err) != 0)
            goto done;
    if (cln_npz_finish(&c->L, shifted_pwrite, c, c->err, sizeof c->err) != 0)
        goto done;
    rc = 0;
done:
    if (rc)
        tool_error("cannot write %s: %s", path, c->err);
    for (size_t m = 0; m < CLN_NPZ_MAX_MEMBERS; ++m) {
        free(c->crc[m].bounds);
        free(c->crc[m].crcs);
    }
    free(offsets);
    free(c);
    return rc ? TOOL_EXIT_RESOURCE : 0;
}
