/* bench_mpi - parallel efficiency of clnode_solve_mpi on a skewed ensemble (run by
 * bench/bench_mpi.sh under mpirun -np 1 and -np 2).
 *
 * The seed model from y0 = 0 over per-trajectory intervals: the first `--long-fraction` of the
 * batch (default 10%) ends at t1 = --long-t1 (default 1000: about 11x the steps), the rest at
 * t1 = 50 (14 steps). The long trajectories come first, as in a sweep sorted by its parameter:
 * a static split gives them all to rank 0; chunks handed out as ranks finish balance them.
 *
 *   bench_mpi [--batch B] [--chunk-size C] [--static] [--device SPEC] [--long-t1 T]
 *             [--long-fraction F] [--grad]
 *
 * --grad: the gradient instead (clnode_gradient_mpi: each chunk solved with keep_tape and gone
 * back through on the host, the loss the sum of the final states; chunks of whole blocks, the
 * default clnode_mpi_gradient_chunk_size).
 *
 * Prints one line from rank 0: "bench_mpi ranks R split dynamic|static batch B wall S steps N
 * traj_per_s X steps_per_s Y long_steps L short_steps M steps_per_rank a,b cpu_per_rank c,d
 * cpu_max C": wall seconds of the solve, and each rank's CPU seconds over it (a rank that ran out
 * of chunks sleeps: on a machine whose cores are shared, the largest CPU time is what the wall
 * time would be on dedicated cores). Threads per rank: CLNODE_NUM_THREADS (the script sets 1). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clnode.h"
#include "clnode/mpi.h"

typedef struct tally {
    long steps, long_steps, short_steps, n_long, n_short;
    size_t n_long_first;
    double busy;
} tally;

static int on_chunk(void *user, size_t chunk, size_t first, size_t count, clnode_solution **solp,
                    char *msg, size_t msgcap)
{
    const clnode_solution *sol = *solp;
    tally *t = user;
    (void)chunk;
    (void)msg;
    (void)msgcap;
    for (size_t i = 0; i < count; ++i) {
        clnode_trajectory_stats s;
        clnode_solution_stats(sol, i, &s);
        t->steps += s.num_steps;
        if (first + i < t->n_long_first) {
            t->long_steps += s.num_steps;
            t->n_long++;
        } else {
            t->short_steps += s.num_steps;
            t->n_short++;
        }
    }
    return 0;
}

/* --grad: clnode_gradient_mpi of the loss sum(y(t1)) (every cotangent 1). */
static clnode_status gradient(clnode_context *ctx, const clnode_model *model,
                              const clnode_solve_options *o, const clnode_problem *p,
                              const clnode_mpi_options *m)
{
    const size_t n = p->batch * clnode_model_dim(model);
    double *cot = malloc((n ? n : 1) * sizeof *cot);
    if (!cot)
        MPI_Abort(MPI_COMM_WORLD, 3);
    for (size_t i = 0; i < n; ++i)
        cot[i] = 1.0;
    clnode_gradient *g = NULL;
    const clnode_status st =
        clnode_gradient_mpi(ctx, NULL, model, o, NULL, p, 1, cot, MPI_COMM_WORLD, m, NULL, &g);
    clnode_gradient_destroy(&g);
    free(cot);
    return st;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank = 0, R = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &R);
    size_t batch = 4000, chunk = 0;
    int static_split = 0, grad = 0;
    const char *device = "host";
    double long_t1 = 1000, long_fraction = 0.1;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--static") == 0) {
            static_split = 1;
        } else if (strcmp(a, "--grad") == 0) {
            grad = 1;
        } else if (v && strcmp(a, "--batch") == 0) {
            batch = strtoul(v, NULL, 10), ++i;
        } else if (v && strcmp(a, "--chunk-size") == 0) {
            chunk = strtoul(v, NULL, 10), ++i;
        } else if (v && strcmp(a, "--device") == 0) {
            device = v, ++i;
        } else if (v && strcmp(a, "--long-t1") == 0) {
            long_t1 = strtod(v, NULL), ++i;
        } else if (v && strcmp(a, "--long-fraction") == 0) {
            long_fraction = strtod(v, NULL), ++i;
        } else {
            if (rank == 0)
                fprintf(stderr, "bench_mpi: unknown argument %s\n", a);
            MPI_Finalize();
            return 2;
        }
    }
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = device;
    clnode_context *ctx = NULL;
    clnode_model *model = NULL;
    if (clnode_context_create(&co, &ctx) != CLNODE_OK ||
        clnode_model_create_seed(ctx, &model) != CLNODE_OK) {
        fprintf(stderr, "bench_mpi: rank %d: no context on %s\n", rank, device);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    const size_t N = clnode_model_dim(model);
    double *y0 = calloc(batch * N, sizeof *y0), *t1s = malloc(batch * sizeof *t1s);
    if (!y0 || !t1s)
        MPI_Abort(MPI_COMM_WORLD, 3);
    tally t;
    memset(&t, 0, sizeof t);
    t.n_long_first = (size_t)((double)batch * long_fraction);
    for (size_t b = 0; b < batch; ++b)
        t1s[b] = b < t.n_long_first ? long_t1 : 50.0;
    clnode_solve_options o;
    clnode_solve_seed_options(&o);
    o.max_steps = 100000;
    clnode_problem p;
    clnode_problem_default(&p);
    p.batch = batch;
    p.y0 = y0;
    p.t1s = t1s;
    clnode_mpi_options m;
    clnode_mpi_default_options(&m);
    m.chunk_size = chunk;
    m.static_split = static_split;
    m.on_chunk = on_chunk;
    m.chunk_user = &t;
    /* one untimed solve of one trajectory: the GEMM probe and first-touch costs */
    clnode_solution *warm = NULL;
    clnode_problem one = p; /* trajectory 0 alone */
    one.batch = 1;
    clnode_solve(ctx, model, &o, &one, &warm);
    clnode_solution_destroy(&warm);

    MPI_Barrier(MPI_COMM_WORLD);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    const double t0 = MPI_Wtime();
    const clnode_status st = grad ? gradient(ctx, model, &o, &p, &m)
                                  : clnode_solve_mpi(ctx, model, &o, &p, MPI_COMM_WORLD, &m, NULL);
    const double wall = MPI_Wtime() - t0;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    const double cpu = (double)(c1.tv_sec - c0.tv_sec) + 1e-9 * (double)(c1.tv_nsec - c0.tv_nsec);
    if (st != CLNODE_OK) {
        if (rank == 0)
            fprintf(stderr, "bench_mpi: %s\n", clnode_context_last_error(ctx));
        MPI_Finalize();
        return 3;
    }
    long sums[5] = {t.steps, t.long_steps, t.short_steps, t.n_long, t.n_short}, all[5];
    MPI_Reduce(sums, all, 5, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    double *busy = rank == 0 ? malloc(2 * (size_t)R * sizeof *busy) : NULL;
    double mine[2] = {(double)t.steps, cpu}; /* steps this rank solved, its CPU seconds */
    MPI_Gather(mine, 2, MPI_DOUBLE, busy, 2, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("bench_mpi%s ranks %d split %s batch %zu wall %.4f steps %ld traj_per_s %.1f "
               "steps_per_s %.1f long_steps %.1f short_steps %.1f steps_per_rank",
               grad ? " grad" : "", R, static_split ? "static" : "dynamic", batch, wall, all[0],
               (double)batch / wall, (double)all[0] / wall,
               all[3] ? (double)all[1] / (double)all[3] : 0.0,
               all[4] ? (double)all[2] / (double)all[4] : 0.0);
        double cpu_max = 0;
        for (int r = 0; r < R; ++r) {
            printf("%s%.0f", r ? "," : " ", busy[2 * r]);
            cpu_max = busy[2 * r + 1] > cpu_max ? busy[2 * r + 1] : cpu_max;
        }
        printf(" cpu_per_rank");
        for (int r = 0; r < R; ++r)
            printf("%s%.3f", r ? "," : " ", busy[2 * r + 1]);
        printf(" cpu_max %.4f\n", cpu_max);
        free(busy);
    }
    free(y0);
    free(t1s);
    clnode_model_destroy(&model);
    clnode_context_destroy(&ctx);
    MPI_Finalize();
    return 0;
}
