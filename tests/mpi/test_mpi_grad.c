/* test_mpi_grad - clnode_gradient_mpi under mpirun -np R (tests/mpi/meson.build runs R = 1..4):
 * the parameters' gradient (on every rank), the y0 and input cotangents (rank 0) bit-identical to
 * one clnode_gradient_compute of the whole batch on one process, in fp32 and fp64, at chunk sizes
 * of 1 and 3 blocks and the default, dynamic and static splits, and resumed (skipped chunks
 * given back through get_gradient); a chunk size that is not whole
 * blocks refused with a message naming it, and a rank whose solves fail making the call fail on
 * every rank. Exits 0 on success; prints the first failures. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode.h"
#include "clnode/gradient.h"
#include "clnode/mpi.h"
#include "test_util.h"

#define B 219 /* 7 blocks, the last partial */
#define N 3
#define K 2
#define H 16
#define SLOTS 3

static int rank, R;
static int fails;

#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "test_mpi_grad rank %d: line %d: ", rank, __LINE__);                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            fails++;                                                                               \
        }                                                                                          \
    } while (0)

static double w0[H * (N + K)], b0[H], w1[H * H], b1[H], w2[N * H], b2[N];
static double y0[B * N], inputs[B * K], t1s[B], cot[B * SLOTS * N];

static void quiet(void *user, clnode_log_level level, clnode_log_code code, const char *msg)
{
    (void)user;
    (void)level;
    (void)code;
    (void)msg;
}

/* A tanh MLP with conditioning inputs and an output scale, and a mixed-cost batch. */
static clnode_model *make_model(clnode_context *ctx)
{
    uint32_t x = 12345;
    double *arrays[6] = {w0, b0, w1, b1, w2, b2};
    const size_t sizes[6] = {H * (N + K), H, H * H, H, N * H, N};
    const double scales[6] = {0.6, 0.2, 0.25, 0.2, 0.25, 0.1};
    for (size_t a = 0; a < 6; ++a)
        for (size_t i = 0; i < sizes[a]; ++i)
            arrays[a][i] = scales[a] * test_lcg(&x);
    for (size_t i = 0; i < B * N; ++i)
        y0[i] = test_lcg(&x);
    for (size_t i = 0; i < B * K; ++i)
        inputs[i] = 0.5 * test_lcg(&x);
    for (size_t i = 0; i < B * SLOTS * N; ++i)
        cot[i] = test_lcg(&x);
    for (size_t b = 0; b < B; ++b)
        t1s[b] = b % 5 == 0 ? 6.0 : 2.0 + 0.01 * (double)(b % 7);
    size_t ls[4] = {N + K, H, H, N};
    const double *ws[3] = {w0, w1, w2}, *bs[3] = {b0, b1, b2};
    static const double scale = 0.8;
    clnode_model_desc d = test_mlp_desc(3, ls, ws, bs);
    d.activation = CLNODE_ACT_TANH;
    d.num_inputs = K;
    d.out_scale = &scale;
    d.out_scale_size = 1;
    clnode_model *m = NULL;
    if (clnode_model_create(ctx, &d, &m) != CLNODE_OK)
        return NULL;
    return m;
}

static clnode_solve_options make_opts(clnode_precision prec)
{
    clnode_solve_options o;
    clnode_solve_default_options(&o);
    o.precision = prec;
    o.rtol = prec == CLNODE_FP64 ? 1e-7 : 1e-4;
    o.atol = prec == CLNODE_FP64 ? 1e-9 : 1e-6;
    o.save_t0 = 1;
    o.save_t1 = 1;
    o.checkpoint_every = 3;
    return o;
}

/* The one-process reference: clnode_gradient_compute of the whole batch. */
static clnode_gradient *reference(clnode_context *ctx, const clnode_model *m,
                                  const clnode_solve_options *po, const clnode_problem *p)
{
    clnode_solve_options o = *po;
    o.keep_tape = 1;
    clnode_solution *sol = NULL;
    clnode_gradient *g = NULL;
    if (clnode_solve(ctx, m, &o, p, &sol) != CLNODE_OK ||
        clnode_gradient_compute(ctx, m, NULL, sol, SLOTS, cot, &g) != CLNODE_OK)
        fprintf(stderr, "test_mpi_grad: the reference failed: %s\n",
                clnode_context_last_error(ctx));
    clnode_solution_destroy(&sol);
    return g;
}

/* One clnode_gradient_mpi against the reference, bit for bit. */
static void compare(clnode_context *ctx, const clnode_model *m, const clnode_solve_options *o,
                    const clnode_problem *p, const clnode_gradient *ref, size_t chunk,
                    int static_split, const char *what)
{
    clnode_mpi_options mo;
    clnode_mpi_default_options(&mo);
    mo.chunk_size = chunk;
    mo.static_split = static_split;
    clnode_gradient *g = NULL;
    const clnode_status st =
        clnode_gradient_mpi(ctx, NULL, m, o, NULL, p, SLOTS, cot, MPI_COMM_WORLD, &mo, NULL, &g);
    EXPECT(st == CLNODE_OK, "%s: %s", what, clnode_context_last_error(ctx));
    if (st != CLNODE_OK)
        return;
    size_t n = 0, nr = 0;
    const double *th = clnode_gradient_params(g, &n), *tr = clnode_gradient_params(ref, &nr);
    size_t diff = 0;
    for (size_t i = 0; i < n && n == nr; ++i)
        diff += memcmp(&th[i], &tr[i], sizeof th[i]) != 0;
    EXPECT(n == nr && diff == 0, "%s: %zu of %zu parameters' gradients differ from one process",
           what, diff, nr);
    if (rank == 0) {
        EXPECT(memcmp(clnode_gradient_y0(g), clnode_gradient_y0(ref), sizeof y0) == 0,
               "%s: the y0 cotangents differ from one process", what);
        EXPECT(memcmp(clnode_gradient_inputs(g), clnode_gradient_inputs(ref), sizeof inputs) == 0,
               "%s: the input cotangents differ from one process", what);
    } else {
        EXPECT(!clnode_gradient_y0(g) && !clnode_gradient_inputs(g), "%s: rows on rank %d", what,
               rank);
    }
    clnode_gradient_destroy(&g);
}

/* The chunks' shares as on_gradient hands them (rank 0, a one-rank run on MPI_COMM_SELF). */
typedef struct shares {
    void *data[B];
    size_t len[B];
} shares;

static int keep_share(void *user, size_t chunk, const void *data, size_t len, char *msg,
                      size_t msgcap)
{
    shares *sh = user;
    (void)msg;
    (void)msgcap;
    sh->data[chunk] = malloc(len);
    if (!sh->data[chunk])
        return 1;
    memcpy(sh->data[chunk], data, len);
    sh->len[chunk] = len;
    return 0;
}

static int give_share(void *user, size_t chunk, const void **data, size_t *len)
{
    shares *sh = user;
    *data = sh->data[chunk];
    *len = sh->len[chunk];
    return sh->data[chunk] ? 0 : -1;
}

/* A resumed run: chunks 0, 3, 6 skipped, their shares given back by get_gradient on rank 0 (from
 * a one-rank run there): the same bits as one process. */
static void check_resumed(clnode_context *ctx, const clnode_model *m, const clnode_problem *p,
                          const clnode_gradient *ref)
{
    const clnode_solve_options o = make_opts(CLNODE_FP32);
    shares sh;
    memset(&sh, 0, sizeof sh);
    clnode_mpi_options mo;
    clnode_mpi_default_options(&mo);
    mo.chunk_size = 32;
    mo.on_gradient = keep_share;
    mo.gradient_user = &sh;
    clnode_gradient *g = NULL;
    if (rank == 0) {
        const clnode_status st = clnode_gradient_mpi(ctx, NULL, m, &o, NULL, p, SLOTS, cot,
                                                     MPI_COMM_SELF, &mo, NULL, &g);
        EXPECT(st == CLNODE_OK && sh.data[6], "the shares: %s", clnode_context_last_error(ctx));
        clnode_gradient_destroy(&g);
    }
    unsigned char skip[7] = {1, 0, 0, 1, 0, 0, 1};
    mo.on_gradient = NULL;
    mo.get_gradient = give_share;
    mo.skip = skip;
    int owner[7];
    const clnode_status st =
        clnode_gradient_mpi(ctx, NULL, m, &o, NULL, p, SLOTS, cot, MPI_COMM_WORLD, &mo, owner, &g);
    EXPECT(st == CLNODE_OK, "resumed: %s", clnode_context_last_error(ctx));
    EXPECT(owner[0] == -1 && owner[3] == -1 && owner[1] >= 0, "resumed: owners %d %d %d", owner[0],
           owner[3], owner[1]);
    size_t n = 0, nr = 0;
    const double *th = clnode_gradient_params(g, &n), *tr = clnode_gradient_params(ref, &nr);
    EXPECT(st == CLNODE_OK && n == nr && memcmp(th, tr, n * sizeof *th) == 0,
           "resumed: the parameters' gradient differs from one process");
    EXPECT(st != CLNODE_OK || rank != 0 ||
               memcmp(clnode_gradient_y0(g), clnode_gradient_y0(ref), sizeof y0) == 0,
           "resumed: the y0 cotangents differ from one process");
    clnode_gradient_destroy(&g);
    for (size_t c = 0; c < 7; ++c)
        free(sh.data[c]);
}

static int cancel_on_last(void *user)
{
    (void)user;
    return rank == R - 1;
}

/* A chunk size that is not whole blocks, and a failing rank: errors on every rank. */
static void check_errors(clnode_context *ctx, const clnode_model *m, const clnode_problem *p)
{
    clnode_solve_options o = make_opts(CLNODE_FP32);
    clnode_mpi_options mo;
    clnode_mpi_default_options(&mo);
    mo.chunk_size = 40;
    clnode_gradient *g = NULL;
    clnode_status st =
        clnode_gradient_mpi(ctx, NULL, m, &o, NULL, p, SLOTS, cot, MPI_COMM_WORLD, &mo, NULL, &g);
    EXPECT(st == CLNODE_ERR_INVALID_ARGUMENT && !g, "chunk size 40: %s", clnode_status_name(st));
    EXPECT(strstr(clnode_context_last_error(ctx),
                  "chunk_size 40 is not a multiple of CLNODE_GRADIENT_BLOCK (32)") != NULL,
           "chunk size 40: message \"%s\"", clnode_context_last_error(ctx));
    mo.chunk_size = 32;
    mo.static_split = 1;
    o.cancel = cancel_on_last;
    st = clnode_gradient_mpi(ctx, NULL, m, &o, NULL, p, SLOTS, cot, MPI_COMM_WORLD, &mo, NULL, &g);
    char want[64];
    snprintf(want, sizeof want, "rank %d of %d failed on trajectories", R - 1, R);
    EXPECT(st == CLNODE_ERR_CANCELLED && !g, "failing rank: %s", clnode_status_name(st));
    EXPECT(strstr(clnode_context_last_error(ctx), want) != NULL, "failing rank: message \"%s\"",
           clnode_context_last_error(ctx));
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    EXPECT(clnode_mpi_gradient_chunk_size(B) == 32 && clnode_mpi_gradient_chunk_size(6400) == 128 &&
               clnode_mpi_gradient_chunk_size((size_t)1 << 30) == 4096,
           "the default gradient chunk sizes");
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = "host";
    co.log = quiet;
    clnode_context *ctx = NULL;
    clnode_model *m = NULL;
    if (clnode_context_create(&co, &ctx) != CLNODE_OK || !(m = make_model(ctx))) {
        fprintf(stderr, "test_mpi_grad: no host context or model\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = B;
    p.y0 = y0;
    p.inputs = inputs;
    p.t1s = t1s;
    const double ts[1] = {1.5};
    p.save_ts = ts;
    p.n_save_ts = 1;
    const clnode_precision precs[2] = {CLNODE_FP32, CLNODE_FP64};
    for (int k = 0; k < 2; ++k) {
        const clnode_solve_options o = make_opts(precs[k]);
        clnode_gradient *ref = reference(ctx, m, &o, &p);
        if (!ref)
            MPI_Abort(MPI_COMM_WORLD, 1);
        char what[64];
        const size_t chunks[3] = {32, 96, 0};
        for (int c = 0; c < 3; ++c)
            for (int s = 0; s < 2; ++s) {
                snprintf(what, sizeof what, "%s chunk %zu %s", k ? "fp64" : "fp32", chunks[c],
                         s ? "static" : "dynamic");
                compare(ctx, m, &o, &p, ref, chunks[c], s, what);
            }
        if (k == 0)
            check_resumed(ctx, m, &p, ref);
        clnode_gradient_destroy(&ref);
    }
    check_errors(ctx, m, &p);
    int total = 0;
    MPI_Allreduce(&fails, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("test_mpi_grad: %d ranks: %s\n", R,
               total ? "FAILED" : "theta, ybar, cbar bit-identical to one process");
    clnode_model_destroy(&m);
    clnode_context_destroy(&ctx);
    MPI_Finalize();
    return total ? 1 : 0;
}
