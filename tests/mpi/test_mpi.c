/* test_mpi - clnode_solve_mpi and clnode_mpi_gather under mpirun -np R (tests/mpi/meson.build
 * runs R = 1..4): every chunk's trajectories bit-identical to one clnode_solve of the whole batch
 * on one process (dynamic and static splits, skipped chunks), every chunk solved exactly once, the
 * gather in chunk order, and a rank whose solve fails making the call fail on every rank with a
 * message naming it. Exits 0 on success; prints the first failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode.h"
#include "test_problem.h"
#include "clnode/mpi.h"

#define B 45
#define CHUNK 4

static int rank, R;
static int fails;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "test_mpi rank %d: line %d: ", rank, __LINE__);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

typedef struct check {
    const clnode_solution *ref;
    size_t dim;
    int seen[B]; /* trajectories handed to this rank's callback */
    int fail_rank;
    size_t fail_chunk;        /* the callback fails on this chunk (0: none) */
    clnode_solution *kept[B]; /* solutions the callback took (every other chunk) */
    int keep;
} check;

static int on_chunk(void *user, size_t chunk, size_t first, size_t count, clnode_solution **solp,
                    char *msg, size_t msgcap)
{
    const clnode_solution *sol = *solp;
    check *c = user;
    if (c->fail_chunk && chunk == c->fail_chunk) {
        snprintf(msg, msgcap, "cannot write chunk %zu", chunk);
        return 1;
    }
    EXPECT(first == chunk * CHUNK && count == (first + CHUNK <= B ? CHUNK : B - first),
           "chunk %zu: first %zu count %zu", chunk, first, count);
    for (size_t i = 0; i < count; ++i) {
        clnode_trajectory_stats a, r;
        clnode_solution_stats(sol, i, &a);
        clnode_solution_stats(c->ref, first + i, &r);
        EXPECT(a.num_steps == r.num_steps && a.result == r.result,
               "trajectory %zu: %ld steps, %ld alone", first + i, a.num_steps, r.num_steps);
        EXPECT(memcmp(clnode_solution_y_final(sol, i), clnode_solution_y_final(c->ref, first + i),
                      c->dim * sizeof(double)) == 0,
               "trajectory %zu: final state not bit-identical to the one-process solve", first + i);
        size_t na = 0, nr = 0;
        const double *ta, *ya, *tr, *yr;
        clnode_solution_saved(sol, i, CLNODE_SAVE_TS, &na, &ta, &ya);
        clnode_solution_saved(c->ref, first + i, CLNODE_SAVE_TS, &nr, &tr, &yr);
        EXPECT(na == nr && (!na || (memcmp(ta, tr, na * sizeof *ta) == 0 &&
                                    memcmp(ya, yr, na * c->dim * sizeof *ya) == 0)),
               "trajectory %zu: its save times' points not bit-identical to the one-process solve",
               first + i);
        c->seen[first + i]++;
    }
    if (c->keep && chunk % 2 == 0) { /* take the solution: the library must not destroy it */
        c->kept[chunk] = *solp;
        *solp = NULL;
    }
    return 0;
}

static int cancel_on_rank(void *user)
{
    return ((check *)user)->fail_rank == rank;
}

/* Every chunk solved once by its owner, and only the chunks not skipped. */
static void check_owners(const check *c, const int *owner, size_t nc, const unsigned char *skip)
{
    int seen[B];
    MPI_Allreduce(c->seen, seen, B, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    for (size_t k = 0; k < nc; ++k) {
        const int skipped = skip && skip[k];
        EXPECT(skipped ? owner[k] == -1 : owner[k] >= 0 && owner[k] < R, "chunk %zu: owner %d", k,
               owner[k]);
        for (size_t b = k * CHUNK; b < B && b < (k + 1) * CHUNK; ++b)
            EXPECT(seen[b] == !skipped, "trajectory %zu handed out %d times", b, seen[b]);
        if (!skipped && owner[k] == rank)
            EXPECT(c->seen[k * CHUNK] == 1, "chunk %zu owned by rank %d, solved elsewhere", k,
                   rank);
    }
}

static int get_bytes(void *user, size_t chunk, const void **data, size_t *len)
{
    static char buf[64];
    (void)user;
    *len = (size_t)snprintf(buf, sizeof buf, "[chunk %zu from rank %d]", chunk, rank);
    *data = buf;
    return 0;
}

static int deliver(void *user, size_t chunk, const void *data, size_t len)
{
    size_t *next = user;
    char want[32];
    const int n = snprintf(want, sizeof want, "[chunk %zu from", chunk);
    EXPECT(chunk == *next && len > (size_t)n && memcmp(data, want, (size_t)n) == 0,
           "gather: chunk %zu delivered as %zu-th: %.*s", chunk, *next, (int)len,
           (const char *)data);
    ++*next;
    return 0;
}

static void quiet(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    (void)code;
    (void)user;
    (void)level;
    (void)msg;
}

/* Each trajectory its own save times (clnode_problem.save_ts_per_trajectory): every chunk solves
 * its rows of them, bit-identical to the one-process solve, dynamic and static splits. */
static void check_save_rows(clnode_context *ctx, const clnode_model *model,
                            const clnode_solve_options *po, const clnode_problem *pb,
                            const double *y0, const double *t1s)
{
    int owner[B];
    const clnode_solve_options o = *po;
    const size_t N = clnode_model_dim(model), nc = clnode_mpi_num_chunks(B, CHUNK);
    /* each trajectory its own save times: every chunk solves its rows of them */
    double rows[B * 3];
    for (size_t b = 0; b < B; ++b)
        for (size_t j = 0; j < 3; ++j)
            rows[b * 3 + j] = t1s[b] * (double)(j + 1 + b % 2) / 4.0;
    clnode_problem pr = *pb;
    pr.save_ts = rows;
    pr.n_save_ts = 3;
    pr.save_ts_per_trajectory = 1;
    clnode_solution *ref_rows = NULL;
    EXPECT(clnode_solve(ctx, model, &o, test_batch(&pr, B, y0), &ref_rows) == CLNODE_OK,
           "the per-trajectory save times' reference: %s", clnode_context_last_error(ctx));
    for (int mode = 0; ref_rows && mode < 2; ++mode) { /* dynamic, static */
        check c;
        memset(&c, 0, sizeof c);
        c.ref = ref_rows;
        c.dim = N;
        c.fail_rank = -1;
        clnode_mpi_options m;
        clnode_mpi_default_options(&m);
        m.chunk_size = CHUNK;
        m.static_split = mode == 1;
        m.on_chunk = on_chunk;
        m.chunk_user = &c;
        const clnode_status rst =
            clnode_solve_mpi(ctx, model, &o, test_batch(&pr, B, y0), MPI_COMM_WORLD, &m, owner);
        EXPECT(rst == CLNODE_OK, "per-trajectory save times, mode %d: %s", mode,
               clnode_context_last_error(ctx));
        check_owners(&c, owner, nc, NULL);
        for (size_t b = 0; b < B && rank == 0 && mode == 0; ++b) { /* the rows were saved */
            size_t n = 0;
            const double *ts = NULL;
            clnode_solution_saved(ref_rows, b, CLNODE_SAVE_TS, &n, &ts, NULL);
            EXPECT(n == 3 && ts[0] == rows[b * 3] && ts[2] == rows[b * 3 + 2],
                   "trajectory %zu saved %zu of its own times", b, n);
        }
    }
    clnode_solution_destroy(&ref_rows);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    /* the default chunk size of clnode/mpi.h: about 64 chunks, 1 to 4096 trajectories each */
    EXPECT(clnode_mpi_default_chunk_size(0) == 1 && clnode_mpi_default_chunk_size(1) == 1,
           "the smallest default chunk");
    EXPECT(clnode_mpi_num_chunks(6400, 0) == 64 && clnode_mpi_num_chunks(6401, 0) == 64,
           "about 64 chunks");
    EXPECT(clnode_mpi_default_chunk_size((size_t)1 << 30) == 4096, "at most 4096 per chunk");
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = quiet;
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    if (clnode_context_create(&co, &ctx) != CLNODE_OK ||
        clnode_model_create_seed(ctx, &model) != CLNODE_OK) {
        fprintf(stderr, "test_mpi: no host context\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const size_t N = clnode_model_dim(model);
    /* a mixed-cost ensemble: per-trajectory ends from 5 to 150 (some take many more steps) */
    double y0[B * 10], t1s[B];
    for (size_t b = 0; b < B; ++b) {
        t1s[b] = 5.0 + (double)((b * 7) % 30) * 5.0;
        for (size_t j = 0; j < N; ++j)
            y0[b * N + j] = 0.1 * (double)((b + j) % 5) - 0.2;
    }
    clnode_solve_options o;
    clnode_problem pb = test_problem(0, NULL);
    clnode_solve_seed_options(&o);
    pb.t1s = t1s;
    o.precision_guard = CLNODE_GUARD_OFF;
    clnode_solution *ref = NULL;
    if (clnode_solve(ctx, model, &o, test_batch(&pb, B, y0), &ref) != CLNODE_OK) {
        fprintf(stderr, "test_mpi: the reference solve failed: %s\n",
                clnode_context_last_error(ctx));
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    const size_t nc = clnode_mpi_num_chunks(B, CHUNK);
    EXPECT(nc == (B + CHUNK - 1) / CHUNK, "%zu chunks", nc);
    int owner[B];
    unsigned char skip[B] = {0};
    for (size_t k = 0; k < nc; k += 3)
        skip[k] = 1;

    for (int mode = 0; mode < 3; ++mode) { /* dynamic, static, dynamic with skipped chunks */
        check c;
        memset(&c, 0, sizeof c);
        c.ref = ref;
        c.dim = N;
        c.fail_rank = -1;
        clnode_mpi_options m;
        clnode_mpi_default_options(&m);
        m.chunk_size = CHUNK;
        m.static_split = mode == 1;
        m.skip = mode == 2 ? skip : NULL;
        m.on_chunk = on_chunk;
        m.chunk_user = &c;
        c.keep = mode == 0;
        clnode_status st =
            clnode_solve_mpi(ctx, model, &o, test_batch(&pb, B, y0), MPI_COMM_WORLD, &m, owner);
        EXPECT(st == CLNODE_OK, "mode %d: %s", mode, clnode_context_last_error(ctx));
        check_owners(&c, owner, nc, m.skip);
        for (size_t k = 0; k < nc; ++k) { /* the kept solutions outlive the call, intact */
            if (!c.kept[k])
                continue;
            EXPECT(owner[k] == rank && clnode_solution_batch(c.kept[k]) ==
                                           (k * CHUNK + CHUNK <= B ? CHUNK : B - k * CHUNK),
                   "kept chunk %zu", k);
            EXPECT(memcmp(clnode_solution_y_final(c.kept[k], 0),
                          clnode_solution_y_final(ref, k * CHUNK), N * sizeof(double)) == 0,
                   "kept chunk %zu: final state changed after the call", k);
            clnode_solution_destroy(&c.kept[k]);
        }
    }

    check_save_rows(ctx, model, &o, &pb, y0, t1s);

    /* gather in chunk order, from owners of a dynamic run */
    size_t next = 0;
    clnode_status st =
        clnode_mpi_gather(ctx, MPI_COMM_WORLD, 0, nc, owner, get_bytes, deliver, &next);
    EXPECT(st == CLNODE_OK, "gather: %s", clnode_context_last_error(ctx));
    EXPECT(rank != 0 || next == nc, "gather delivered %zu of %zu chunks", next, nc);

    /* the last rank's solves fail (a static split, so that it has chunks): every rank fails with
       a message naming it */
    check c;
    memset(&c, 0, sizeof c);
    c.ref = ref;
    c.dim = N;
    c.fail_rank = R - 1;
    o.cancel = cancel_on_rank;
    o.cancel_user = &c;
    clnode_mpi_options m;
    clnode_mpi_default_options(&m);
    m.chunk_size = CHUNK;
    m.static_split = 1;
    m.on_chunk = on_chunk;
    m.chunk_user = &c;
    st = clnode_solve_mpi(ctx, model, &o, test_batch(&pb, B, y0), MPI_COMM_WORLD, &m, owner);
    char want[96];
    const size_t lost = nc * (size_t)(R - 1) / (size_t)R * CHUNK;
    snprintf(want, sizeof want, "rank %d of %d failed on trajectories %zu..%zu (lost)", R - 1, R,
             lost, lost + CHUNK - 1);
    EXPECT(st == CLNODE_ERR_CANCELLED, "failing rank: status %s", clnode_status_name(st));
    EXPECT(strstr(clnode_context_last_error(ctx), want) != NULL, "failing rank: message \"%s\"",
           clnode_context_last_error(ctx));
    EXPECT(strstr(clnode_context_last_error(ctx), "left unsolved") != NULL,
           "failing rank: message \"%s\"", clnode_context_last_error(ctx));

    /* a dynamic split whose callback fails on chunk 5, wherever it is solved */
    c.fail_rank = -1;
    c.fail_chunk = 5;
    m.static_split = 0;
    st = clnode_solve_mpi(ctx, model, &o, test_batch(&pb, B, y0), MPI_COMM_WORLD, &m, owner);
    EXPECT(st == CLNODE_ERR_IO, "failing callback: status %s", clnode_status_name(st));
    EXPECT(strstr(clnode_context_last_error(ctx),
                  "failed on trajectories 20..23 (lost): the "
                  "chunk callback failed: cannot write chunk 5") != NULL,
           "failing callback: message \"%s\"", clnode_context_last_error(ctx));

    int total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi: %d ranks, %zu chunks of %d: %s\n", R, nc, CHUNK,
               total ? "FAILED" : "every trajectory bit-identical, failures collective");
    clnode_solution_destroy(&ref);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    MPI_Finalize();
    return total ? 1 : 0;
}
