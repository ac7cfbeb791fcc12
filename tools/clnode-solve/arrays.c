/* arrays.c - clnode-solve's .npy/.npz inputs and outputs (arrays.h). */
#include "arrays.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "npy.h"
#include "npz.h"
#include "tool_problem.h"

/* ---- inputs ---- */

enum {
    ARR_Y0,
    ARR_T0,
    ARR_T1,
    ARR_DT0,
    ARR_ARGS,
    ARR_TS,
    ARR_COUNT
};
static const char *const arr_names[ARR_COUNT] = {"y0", "t0", "t1", "dt0", "args", "ts"};

static const char *shape_str(char *buf, size_t cap, const cln_npy_header *h)
{
    size_t n = (size_t)snprintf(buf, cap, "(");
    for (size_t d = 0; d < h->ndim && n < cap; ++d)
        n += (size_t)snprintf(buf + n, cap - n, d ? ", %zu" : "%zu", h->shape[d]);
    if (n < cap)
        snprintf(buf + n, cap - n, h->ndim == 1 ? ",)" : ")");
    return buf;
}

/* Checks the header of array `which` (from `src`: a file name, or "FILE member NAME") against
 * the model (N, k) and the arrays read before: its shape, and its number of trajectories
 * (*rows). Returns 0, or 2 after an error. */
static int check_shape(const solve_arrays *s, int which, const char *src, const cln_npy_header *h,
                       size_t N, size_t k, size_t *rows)
{
    char sh[128];
    if (which == ARR_Y0) {
        if (h->ndim == 1 && h->shape[0] == N) {
            *rows = 1;
        } else if (h->ndim == 2 && h->shape[1] == N) {
            *rows = h->shape[0];
        } else {
            tool_error("%s: y0 of shape %s, but the model's state has %zu components: (B, %zu) "
                       "or (%zu,) expected",
                       src, shape_str(sh, sizeof sh, h), N, N, N);
            return TOOL_EXIT_INPUT;
        }
    } else if (which == ARR_ARGS) {
        if (k == 0) {
            tool_error("%s: the model takes no conditioning inputs (its metadata has no "
                       "\"inputs\"), but args are given",
                       src);
            return TOOL_EXIT_INPUT;
        }
        if (h->ndim != 2 || h->shape[1] != k) {
            tool_error("%s: args of shape %s, but the model takes %zu conditioning inputs: "
                       "(B, %zu) expected",
                       src, shape_str(sh, sizeof sh, h), k, k);
            return TOOL_EXIT_INPUT;
        }
        *rows = h->shape[0];
    } else if (which == ARR_TS) {
        if (h->ndim != 2 || h->shape[1] == 0) {
            tool_error("%s: ts of shape %s: each trajectory's save times, (B, T) with T >= 1, "
                       "expected",
                       src, shape_str(sh, sizeof sh, h));
            return TOOL_EXIT_INPUT;
        }
        *rows = h->shape[0];
    } else {
        if (h->ndim != 1) {
            tool_error("%s: %s of shape %s: one value per trajectory, (B,), expected", src,
                       arr_names[which], shape_str(sh, sizeof sh, h));
            return TOOL_EXIT_INPUT;
        }
        *rows = h->shape[0];
    }
    if (*rows == 0) {
        tool_error("%s: %s holds no trajectory", src, arr_names[which]);
        return TOOL_EXIT_INPUT;
    }
    if (*rows > (size_t)TOOL_BATCH_MAX) {
        tool_error("%s: %s holds %zu trajectories, more than %ld (the batch limit)", src,
                   arr_names[which], *rows, (long)TOOL_BATCH_MAX);
        return TOOL_EXIT_INPUT;
    }
    if (s->batch && *rows != s->batch) {
        tool_error("%s: %s holds %zu trajectories, but %s holds %zu", src, arr_names[which], *rows,
                   s->batch_src, s->batch);
        return TOOL_EXIT_INPUT;
    }
    return 0;
}

/* check_shape for a file's header before its data are read (tool_read_npy). */
typedef struct shape_check {
    const solve_arrays *s;
    int which;
    const char *src;
    size_t N, k;
} shape_check;

static int check_file_shape(void *user, const cln_npy_header *h)
{
    const shape_check *c = user;
    size_t rows;
    return check_shape(c->s, c->which, c->src, h, c->N, c->k, &rows);
}

/* Checks array `which` (its .npy image `img` of `size` bytes, from `src`) and stores its values.
 * Returns 0, 2 or 3 after an error. */
static int take(solve_arrays *s, int which, const char *src, const unsigned char *img, size_t size,
                size_t N, size_t k)
{
    cln_npy_header h;
    char err[256];
    if (cln_npy_parse(img, size, &h, err, sizeof err)) {
        tool_error("%s: %s", src, err);
        return TOOL_EXIT_INPUT;
    }
    size_t rows;
    const int rc = check_shape(s, which, src, &h, N, k, &rows);
    if (rc)
        return rc;
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
    double **dst[ARR_COUNT] = {&s->y0, &s->t0s, &s->t1s, &s->dt0s, &s->inputs, &s->ts};
    *dst[which] = v;
    if (which == ARR_TS)
        s->n_ts = per;
    if (!s->batch) {
        s->batch = rows;
        snprintf(s->batch_src, sizeof s->batch_src, "%.200s", src);
    }
    return 0;
}

int solve_arrays_load(const solve_args *a, size_t N, size_t k, solve_arrays *s)
{
    memset(s, 0, sizeof *s);
    const char *files[ARR_COUNT] = {NULL,        a->t0_file,   a->t1_file,
                                    a->dt0_file, a->args_file, a->ts_file};
    int rc = 0;
    for (int w = ARR_T0; w < ARR_COUNT && !rc; ++w) {
        if (!files[w])
            continue;
        unsigned char *img = NULL;
        size_t len = 0;
        shape_check c = {s, w, files[w], N, k};
        if ((rc = tool_read_npy(files[w], check_file_shape, &c, &img, &len)) == 0)
            rc = take(s, w, files[w], img, len, N, k);
        free(img);
    }
    if (!rc && a->in_path) {
        unsigned char *img = NULL;
        size_t len = 0, n = 0;
        cln_npz_entry e[CLN_NPZ_MAX_MEMBERS];
        char err[256];
        if ((rc = tool_read_npz(a->in_path, &img, &len)) == 0 &&
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
                tool_error("%s: unknown member %s.npy (y0, t0, t1, dt0, args and ts are read)",
                           a->in_path, e[i].name);
                rc = TOOL_EXIT_INPUT;
            } else if (w == ARR_Y0 && (a->pb.y0_file || a->pb.y0)) {
                tool_error("%s: y0 is given twice (the member y0 and %s)", a->in_path,
                           a->pb.y0_file ? "--y0-file" : "--y0");
                rc = TOOL_EXIT_INPUT;
            } else if (w == ARR_TS && a->pb.n_ts) {
                tool_error("%s: ts is given twice (the member ts and --save ts:)", a->in_path);
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
    free(s->ts);
    memset(s, 0, sizeof *s);
}

/* ---- outputs ---- */

/* Writes through the caller's writer, shifted back by the offset of the .npy member in the
 * archive layout (a bare .npy file is that member alone). */
typedef struct shifted {
    cln_npz_pwrite_fn fn;
    void *user;
    uint64_t shift;
} shifted;

static int shifted_pwrite(void *user, const void *buf, size_t len, uint64_t offset)
{
    const shifted *s = user;
    return s->fn(s->user, buf, len, offset - s->shift);
}

int solve_out_plan(solve_out *w, int format, int ragged, const clnode_solve_options *o,
                   const clnode_problem *p, size_t B, size_t N, uint64_t points, char *err,
                   size_t errlen)
{
    memset(w, 0, sizeof *w);
    w->format = format;
    w->ragged = ragged;
    w->o = o;
    w->p = p;
    w->B = B;
    w->N = N;
    w->f4 = o->precision == CLNODE_FP32;
    const cln_npz_dtype ft = w->f4 ? CLN_NPZ_F4 : CLN_NPZ_F8;
    cln_npz_layout *L = &w->L;
    cln_npz_init(L, CLN_NPZ_ZIP64_THRESHOLD);
    if (ragged && format != SOLVE_OUT_NPZ) {
        snprintf(err, errlen, "ragged output needs .npz");
        return -1;
    }
    if (ragged) {
        w->T = 0;
        if (cln_npz_add(L, "ts", ft, 1, (uint64_t[]){points}, err, errlen) < 0 ||
            cln_npz_add(L, "ys", ft, 2, (uint64_t[]){points, N}, err, errlen) < 0 ||
            cln_npz_add(L, "offsets", CLN_NPZ_I8, 1, (uint64_t[]){B + 1}, err, errlen) < 0)
            return -1;
    } else {
        w->T = (size_t)points;
        if (!o->save_steps && clnode_save_slots(NULL, o, p, &w->T) != CLNODE_OK) {
            snprintf(err, errlen, "the save options have no layout");
            return -1;
        }
        if ((format == SOLVE_OUT_NPZ &&
             cln_npz_add(L, "ts", ft, 2, (uint64_t[]){B, w->T}, err, errlen) < 0) ||
            cln_npz_add(L, "ys", ft, 3, (uint64_t[]){B, w->T, N}, err, errlen) < 0)
            return -1;
    }
    if (format == SOLVE_OUT_NPZ) {
        static const char *const names[3] = {"num_steps", "num_accepted", "num_rejected"};
        for (int k = 0; k < 3; ++k)
            if (cln_npz_add(L, names[k], CLN_NPZ_I8, 1, (uint64_t[]){B}, err, errlen) < 0)
                return -1;
        if (cln_npz_add(L, "result", CLN_NPZ_I4, 1, (uint64_t[]){B}, err, errlen) < 0 ||
            cln_npz_add(L, "format_version", CLN_NPZ_I8, 0, NULL, err, errlen) < 0)
            return -1;
    }
    return cln_npz_plan(L, err, errlen);
}

int solve_out_check_part(const solve_out *w, const solve_out_part *p, solve_out_pread_fn fn,
                         void *user)
{
    enum {
        CHUNK = 1 << 20
    };
    const uint64_t shift = w->format == SOLVE_OUT_NPY ? w->L.m[0].npy_off : 0;
    unsigned char *buf = malloc(CHUNK);
    if (!buf)
        return -1;
    int ok = 1;
    for (size_t m = 0; m < w->L.n && ok; ++m) {
        if (p->r0[m] == p->r1[m])
            continue;
        const cln_npz_member *mm = &w->L.m[m];
        if (p->r0[m] > p->r1[m] || p->r1[m] > mm->rows) {
            ok = 0;
            break;
        }
        uint64_t off = mm->data_off + p->r0[m] * mm->row_bytes - shift;
        uint64_t left = (p->r1[m] - p->r0[m]) * mm->row_bytes;
        uLong crc = crc32(0, Z_NULL, 0);
        while (left > 0 && ok) {
            const size_t n = left < CHUNK ? (size_t)left : CHUNK;
            if (fn(user, buf, n, off) != 0) {
                ok = 0;
                break;
            }
            crc = crc32(crc, buf, (uInt)n);
            off += n;
            left -= n;
        }
        ok = ok && (uint32_t)crc == p->crc[m];
    }
    free(buf);
    return ok;
}

/* One writer's pass: its part, and the writer shifted for a bare .npy. */
typedef struct pass {
    const solve_out *w;
    shifted sh;
    solve_out_part *part;
    char *err;
    size_t errlen;
} pass;

/* Writes rows [r0, r1) of member `name` (absent from an .npy layout: nothing to do) and
 * appends their CRC to the part's range of that member (rows must follow on). */
static int put_rows(pass *ps, const char *name, uint64_t r0, uint64_t r1, const void *v)
{
    const int m = cln_npz_find(&ps->w->L, name);
    if (m < 0)
        return 0;
    uint32_t crc;
    if (cln_npz_write_rows(&ps->w->L, (size_t)m, r0, r1, v, shifted_pwrite, &ps->sh, &crc, ps->err,
                           ps->errlen) != 0)
        return -1;
    solve_out_part *p = ps->part;
    if (p->r0[m] == p->r1[m]) {
        p->r0[m] = r0;
        p->r1[m] = r1;
        p->crc[m] = crc;
    } else if (r1 > r0) {
        /* a CRC of A followed by B, from both CRCs (zlib's crc32_combine) */
        p->crc[m] =
            (uint32_t)crc32_combine(p->crc[m], crc, (z_off_t)((r1 - r0) * ps->w->L.m[m].row_bytes));
        p->r1[m] = r1;
    }
    return 0;
}

/* The padded rows of local trajectories [b0, b1): ts (rows x T), ys (rows x T x N), in the
 * library's layout (clnode_solution_rows). */
static int fill_padded(const solve_out *w, const clnode_solution *sol, size_t b0, size_t b1,
                       void *ts, void *ys)
{
    const clnode_status st = w->f4 ? clnode_solution_rows_f32(sol, b0, b1 - b0, w->T, ts, ys)
                                   : clnode_solution_rows_f64(sol, b0, b1 - b0, w->T, ts, ys);
    return st == CLNODE_OK ? 0 : -1;
}

static int oom(pass *ps)
{
    snprintf(ps->err, ps->errlen, "out of memory");
    return -1;
}

static int write_stats(pass *ps, const clnode_solution *sol, size_t g0)
{
    const size_t B = clnode_solution_batch(sol);
    int64_t *v = malloc((B ? B : 1) * sizeof *v);
    int32_t *r = malloc((B ? B : 1) * sizeof *r);
    int rc = -1;
    if (!v || !r) {
        oom(ps);
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
        if (put_rows(ps, names[k], g0, g0 + B, v) != 0)
            goto done;
    }
    const int64_t version = SOLVE_ARRAYS_FORMAT_VERSION;
    rc = put_rows(ps, "result", g0, g0 + B, r) != 0 ||
                 (g0 == 0 && put_rows(ps, "format_version", 0, 1, &version) != 0)
             ? -1
             : 0;
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

static int write_padded(pass *ps, const clnode_solution *sol, size_t g0)
{
    const solve_out *w = ps->w;
    const size_t B = clnode_solution_batch(sol), N = w->N, T = w->T;
    const size_t step = piece_rows(T * (N + 1)), isz = w->f4 ? 4 : 8;
    size_t nts, nys;
    if (!tool_mul_size(step, T, &nts) || !tool_mul_size(nts, N, &nys))
        return oom(ps);
    void *ts = malloc(nts ? nts * isz : 1), *ys = malloc(nys ? nys * isz : 1);
    int rc = !ts || !ys ? oom(ps) : 0;
    for (size_t b0 = 0; b0 < B && !rc; b0 += step) {
        const size_t b1 = B - b0 < step ? B : b0 + step;
        if (fill_padded(w, sol, b0, b1, ts, ys) != 0) {
            snprintf(ps->err, ps->errlen, "a trajectory has more saved points than the %zu slots",
                     T);
            rc = -1;
        } else if (put_rows(ps, "ts", g0 + b0, g0 + b1, ts) != 0 ||
                   put_rows(ps, "ys", g0 + b0, g0 + b1, ys) != 0)
            rc = -1;
    }
    free(ts);
    free(ys);
    return rc;
}

static int write_ragged(pass *ps, const clnode_solution *sol, size_t g0, uint64_t p0)
{
    const solve_out *w = ps->w;
    const size_t B = clnode_solution_batch(sol), N = w->N, isz = w->f4 ? 4 : 8;
    /* the offsets of this writer's trajectories; the writer of the last one adds the end */
    const int last = g0 + B == w->B;
    int64_t *off = malloc((B + 1) * sizeof *off);
    if (!off)
        return oom(ps);
    off[0] = (int64_t)p0;
    for (size_t b = 0; b < B; ++b)
        off[b + 1] = off[b] + (int64_t)clnode_solution_points(sol, b);
    int rc = put_rows(ps, "offsets", g0, g0 + B + (size_t)last, off);
    size_t cap = 0;
    void *ts = NULL, *ys = NULL;
    /* pieces of trajectories of about 16 MiB of points */
    for (size_t b0 = 0; b0 < B && !rc;) {
        size_t b1 = b0 + 1;
        while (b1 < B && (size_t)(off[b1 + 1] - off[b0]) * (N + 1) <= ((size_t)2 << 20))
            ++b1;
        const size_t P = (size_t)(off[b1] - off[b0]);
        if (P > cap) {
            free(ts);
            free(ys);
            ts = malloc(P * isz);
            ys = malloc(P * N * isz);
            cap = P;
            if (!ts || !ys) {
                rc = oom(ps);
                break;
            }
        }
        /* each trajectory's row exactly as long as its points */
        for (size_t b = b0; b < b1 && !rc; ++b) {
            const size_t at = (size_t)(off[b] - off[b0]), n = (size_t)(off[b + 1] - off[b]);
            const clnode_status st =
                w->f4
                    ? clnode_solution_rows_f32(sol, b, 1, n, (float *)ts + at, (float *)ys + at * N)
                    : clnode_solution_rows_f64(sol, b, 1, n, (double *)ts + at,
                                               (double *)ys + at * N);
            if (st != CLNODE_OK) {
                snprintf(ps->err, ps->errlen, "cannot lay out trajectory %zu", g0 + b);
                rc = -1;
            }
        }
        if (!rc && (put_rows(ps, "ts", (uint64_t)off[b0], (uint64_t)off[b1], ts) != 0 ||
                    put_rows(ps, "ys", (uint64_t)off[b0], (uint64_t)off[b1], ys) != 0))
            rc = -1;
        b0 = b1;
    }
    free(ts);
    free(ys);
    free(off);
    return rc;
}

int solve_out_write(const solve_out *w, const clnode_solution *sol, size_t g0, uint64_t p0,
                    cln_npz_pwrite_fn fn, void *user, solve_out_part *part, char *err,
                    size_t errlen)
{
    memset(part, 0, sizeof *part);
    const uint32_t empty = (uint32_t)crc32(0, Z_NULL, 0);
    for (size_t m = 0; m < CLN_NPZ_MAX_MEMBERS; ++m)
        part->crc[m] = empty;
    if (g0 + clnode_solution_batch(sol) > w->B || clnode_solution_dim(sol) != w->N) {
        snprintf(err, errlen, "trajectories [%zu, %zu) of dimension %zu outside the layout", g0,
                 g0 + clnode_solution_batch(sol), clnode_solution_dim(sol));
        return -1;
    }
    pass ps = {
        w, {fn, user, w->format == SOLVE_OUT_NPY ? w->L.m[0].npy_off : 0}, part, err, errlen};
    if ((w->ragged ? write_ragged(&ps, sol, g0, p0) : write_padded(&ps, sol, g0)) != 0)
        return -1;
    return w->format == SOLVE_OUT_NPZ ? write_stats(&ps, sol, g0) : 0;
}

int solve_out_finish(solve_out *w, const solve_out_part *parts, size_t nparts, cln_npz_pwrite_fn fn,
                     void *user, char *err, size_t errlen)
{
    shifted sh = {fn, user, w->format == SOLVE_OUT_NPY ? w->L.m[0].npy_off : 0};
    if (w->format == SOLVE_OUT_NPY) /* a bare .npy: the member's npy header, no CRC */
        return cln_npz_write_npy_header(&w->L, 0, shifted_pwrite, &sh, err, errlen);
    uint64_t *bounds = malloc((nparts + 1) * sizeof *bounds);
    uint32_t *crcs = malloc((nparts ? nparts : 1) * sizeof *crcs);
    int rc = 0;
    if (!bounds || !crcs) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    for (size_t m = 0; m < w->L.n && !rc; ++m) {
        /* the non-empty ranges of this member in row order (the parts come in any order) */
        size_t n = 0;
        uint64_t at = 0;
        bounds[0] = 0;
        for (;;) {
            size_t k = nparts;
            for (size_t i = 0; i < nparts; ++i)
                if (parts[i].r0[m] == at && parts[i].r1[m] > at) {
                    k = i;
                    break;
                }
            if (k == nparts)
                break;
            crcs[n] = parts[k].crc[m];
            at = bounds[++n] = parts[k].r1[m];
        }
        rc = cln_npz_member_crc(&w->L, m, n, bounds, crcs, err, errlen);
    }
    free(bounds);
    free(crcs);
    return rc ? -1 : cln_npz_finish(&w->L, shifted_pwrite, &sh, err, errlen);
}

int solve_arrays_write(int fd, const char *path, int format, int ragged, const clnode_solution *sol,
                       const clnode_solve_options *o, const clnode_problem *p)
{
    solve_out *w = malloc(sizeof *w);
    const size_t B = clnode_solution_batch(sol), N = clnode_solution_dim(sol);
    char err[256] = "out of memory";
    int rc = -1;
    if (!w)
        goto done;
    /* the layout needs the points: the largest count (padded, steps) or the total (ragged) */
    uint64_t points = 0;
    for (size_t b = 0; b < B && (ragged || o->save_steps); ++b) {
        const size_t n = clnode_solution_points(sol, b);
        points = ragged ? points + n : (n > points ? n : points);
    }
    solve_out_part part;
    if (solve_out_plan(w, format, ragged, o, p, B, N, points, err, sizeof err) == 0 &&
        solve_out_write(w, sol, 0, 0, cln_npz_pwrite_fd, &fd, &part, err, sizeof err) == 0 &&
        solve_out_finish(w, &part, 1, cln_npz_pwrite_fd, &fd, err, sizeof err) == 0)
        rc = 0;
done:
    if (rc)
        tool_error("cannot write %s: %s", path, err);
    free(w);
    return rc ? TOOL_EXIT_RESOURCE : 0;
}
