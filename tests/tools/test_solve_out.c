/* test_solve_out.c - clnode-solve's array outputs written by several writers
 * (tools/clnode-solve/arrays.h), as MPI ranks write them: the batch solved in contiguous pieces
 * (each piece its own solve, as on its own rank), each piece written at its offsets in any order,
 * the parts combined by one writer, gives the same bytes as one writer with the whole batch solved
 * at once - padded (--save t1, --save steps, ts slots) and ragged .npz, and .npy. On the host. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clnode.h"
#include "test_problem.h"
#include "arrays.h"

enum {
    B = 7
};

typedef struct mem_file {
    unsigned char *buf;
    uint64_t size;
} mem_file;

static int mem_pwrite(void *user, const void *buf, size_t len, uint64_t off)
{
    mem_file *f = user;
    if (off + len > f->size) {
        unsigned char *nb = realloc(f->buf, off + len);
        if (!nb)
            return -1;
        memset(nb + f->size, 0xAA, off + len - f->size);
        f->buf = nb;
        f->size = off + len;
    }
    memcpy(f->buf + off, buf, len);
    return 0;
}

/* Solves trajectories [b0, b1) of the ensemble alone (base_pb: the save times). */
static clnode_solution *solve_range(clnode_context *ctx, const clnode_model *m,
                                    const clnode_solve_options *base, const clnode_problem *base_pb,
                                    size_t b0, size_t b1, const double *y0, const double *t1s)
{
    clnode_solve_options o = *base;
    clnode_problem pb = *base_pb;
    pb.t1s = t1s + b0;
    clnode_solution *sol = NULL;
    assert_int_equal(clnode_solve(ctx, m, &o, test_batch(&pb, b1 - b0, y0 + b0 * 10), &sol),
                     CLNODE_OK);
    return sol;
}

static void check_splits(int format, int ragged, int steps, int ts)
{
    clnode_context *ctx = NULL;
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    assert_int_equal(clnode_context_create(&co, &ctx), CLNODE_OK);
    clnode_model *m = NULL;
    assert_int_equal(clnode_model_create_seed(ctx, &m), CLNODE_OK);
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_seed_options(&o);
    const double save_ts[3] = {2.0, 9.0, 30.0};
    if (steps) {
        o.save_steps = 1;
        o.save_t1 = 0;
    }
    if (ts) {
        o.save_t0 = 1;
        pb.save_ts = save_ts;
        pb.n_save_ts = 3;
    }
    double y0[B * 10], t1s[B];
    for (size_t i = 0; i < B * 10; ++i)
        y0[i] = 0.01 * (double)(i % 13) - 0.05;
    for (size_t b = 0; b < B; ++b)
        t1s[b] = 5.0 + 7.0 * (double)b;
    pb.t1s = t1s;
    char err[256];
    /* one writer, the whole batch */
    clnode_solution *all = solve_range(ctx, m, &o, &pb, 0, B, y0, t1s);
    mem_file one = {NULL, 0};
    uint64_t points = 0;
    for (size_t b = 0; b < B; ++b) {
        const size_t n = clnode_solution_points(all, b);
        points = ragged ? points + n : (n > points ? n : points);
    }
    solve_out w;
    solve_out_part part;
    assert_int_equal(solve_out_plan(&w, format, ragged, &o, &pb, B, 10, points, err, sizeof err),
                     0);
    assert_int_equal(solve_out_write(&w, all, 0, 0, mem_pwrite, &one, &part, err, sizeof err), 0);
    assert_int_equal(solve_out_finish(&w, &part, 1, mem_pwrite, &one, err, sizeof err), 0);
    assert_int_equal(one.size, format == SOLVE_OUT_NPY ? w.L.m[0].size : w.L.size);
    /* three writers of [0, 2), [2, 5), [5, 7), each with its own solve, writing last first */
    static const size_t cut[4] = {0, 2, 5, B};
    clnode_solution *piece[3];
    uint64_t local_points[3] = {0, 0, 0}, p0[3];
    for (int r = 0; r < 3; ++r) {
        piece[r] = solve_range(ctx, m, &o, &pb, cut[r], cut[r + 1], y0, t1s);
        for (size_t b = 0; b < cut[r + 1] - cut[r]; ++b) {
            const size_t n = clnode_solution_points(piece[r], b);
            local_points[r] =
                ragged ? local_points[r] + n : (n > local_points[r] ? n : local_points[r]);
        }
    }
    /* the all-reduce (max or sum) and the exclusive scan of the point counts */
    uint64_t total = 0;
    for (int r = 0; r < 3; ++r) {
        p0[r] = total;
        total =
            ragged ? total + local_points[r] : (local_points[r] > total ? local_points[r] : total);
    }
    assert_int_equal(total, points);
    mem_file split = {NULL, 0};
    solve_out w2;
    solve_out_part parts[3];
    assert_int_equal(solve_out_plan(&w2, format, ragged, &o, &pb, B, 10, total, err, sizeof err),
                     0);
    for (int r = 2; r >= 0; --r)
        assert_int_equal(solve_out_write(&w2, piece[r], cut[r], p0[r], mem_pwrite, &split,
                                         &parts[r], err, sizeof err),
                         0);
    const solve_out_part shuffled[3] = {parts[1], parts[2], parts[0]};
    assert_int_equal(solve_out_finish(&w2, shuffled, 3, mem_pwrite, &split, err, sizeof err), 0);
    assert_int_equal(split.size, one.size);
    assert_memory_equal(split.buf, one.buf, one.size);
    /* a missing part is refused, not written with a wrong CRC */
    if (format == SOLVE_OUT_NPZ) {
        assert_int_equal(solve_out_finish(&w2, parts, 2, mem_pwrite, &split, err, sizeof err), -1);
        assert_non_null(strstr(err, "do not cover"));
    }
    for (int r = 0; r < 3; ++r)
        clnode_solution_destroy(&piece[r]);
    clnode_solution_destroy(&all);
    free(one.buf);
    free(split.buf);
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
}

static void test_npz_t1(void **state)
{
    (void)state;
    check_splits(SOLVE_OUT_NPZ, 0, 0, 0);
}

static void test_npz_steps_padded(void **state)
{
    (void)state;
    check_splits(SOLVE_OUT_NPZ, 0, 1, 0);
}

static void test_npz_steps_ragged(void **state)
{
    (void)state;
    check_splits(SOLVE_OUT_NPZ, 1, 1, 0);
}

static void test_npz_ts_slots(void **state)
{
    (void)state;
    check_splits(SOLVE_OUT_NPZ, 0, 0, 1);
}

static void test_npy_steps(void **state)
{
    (void)state;
    check_splits(SOLVE_OUT_NPY, 0, 1, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npz_t1),           cmocka_unit_test(test_npz_steps_padded),
        cmocka_unit_test(test_npz_steps_ragged), cmocka_unit_test(test_npz_ts_slots),
        cmocka_unit_test(test_npy_steps),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
