/* bench_grad_worker.c - clnode's side of bench_peers.py --grad: the gradient of the seed problem
 * (the solve with keep_tape, then clnode_gradient_compute on the same device; host:openblas goes
 * back on "host", whose ordered GEMM its reverse pass needs) timed in this process, answering
 * bench_peers.py's worker protocol.
 *
 *   bench_grad_worker fp32|fp64 DEVICE
 *
 * Prints one JSON line about itself ({"device", "version"}), then answers each request line
 * {"batch": B, "repeat": k, "warm": w} with {"times": [k seconds], "steps": the mean steps per
 * trajectory, "check": the sum of dL/dy0}: w untimed gradients, then k timed ones, each the
 * solve of B trajectories from bench_peers.py's initial states (y0[i] = 0.05 ((i 7919) mod 41) /
 * 41) with the seed options (tsit5, rtol 1e-4, atol 1e-6, t in [0, 50], dt0 0.02, max_steps
 * 4096, saving y(t1)) and the reverse pass of the loss sum(y(t1)) (every cotangent 1). The first
 * request for a batch size first makes one untimed call. Exit status 0 at the end of the input,
 * 1 after an error (on standard error). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clnode.h"
#include "clnode/gradient.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The integer after "key": in a request line, or -1. */
static long field(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    p = p ? strchr(p + strlen(key), ':') : NULL;
    return p ? strtol(p + 1, NULL, 10) : -1;
}

typedef struct job {
    clnode_context *ctx, *hctx;
    const clnode_model *m;
    clnode_solve_options o;
    clnode_problem p;
    double *y0, *cot;
    size_t B, N;
} job;

/* One gradient: the kept solve and the reverse pass. Returns 0 with the mean steps and the sum
 * of dL/dy0, or 1 after printing the error. */
static int gradient(job *j, double *steps, double *check)
{
    clnode_solution *s = NULL;
    clnode_gradient *g = NULL;
    clnode_status st = clnode_solve(j->ctx, j->m, &j->o, &j->p, &s);
    if (st == CLNODE_OK)
        st = clnode_gradient_compute(j->hctx, j->m, NULL, s, 1, j->cot, &g);
    if (st != CLNODE_OK) {
        fprintf(stderr, "bench_grad_worker: %s\n", clnode_context_last_error(j->ctx));
        clnode_solution_destroy(&s);
        return 1;
    }
    double n = 0, c = 0;
    for (size_t b = 0; b < j->B; ++b) {
        clnode_trajectory_stats ts;
        clnode_solution_stats(s, b, &ts);
        n += (double)ts.num_steps;
    }
    const double *gy = clnode_gradient_y0(g);
    for (size_t i = 0; i < j->B * j->N; ++i)
        c += gy[i];
    *steps = n / (double)j->B;
    *check = c;
    clnode_gradient_destroy(&g);
    clnode_solution_destroy(&s);
    return 0;
}

/* Sets the job up for a batch of B. Returns 0 or 1 (out of memory). */
static int prepare(job *j, size_t B)
{
    free(j->y0);
    free(j->cot);
    j->B = B;
    j->y0 = malloc(B * j->N * sizeof(double));
    j->cot = malloc(B * j->N * sizeof(double));
    if (!j->y0 || !j->cot) {
        fprintf(stderr, "bench_grad_worker: out of memory at batch %zu\n", B);
        return 1;
    }
    for (size_t i = 0; i < B * j->N; ++i) {
        j->y0[i] = 0.05 * (double)((i * 7919) % 41) / 41.0;
        j->cot[i] = 1.0;
    }
    j->p.batch = B;
    j->p.y0 = j->y0;
    return 0;
}

/* Answers the requests on standard input. Returns the exit status. */
static int serve(job *j)
{
    char line[512];
    size_t ready = 0;
    double steps = 0, check = 0;
    while (fgets(line, sizeof line, stdin)) {
        const long B = field(line, "\"batch\""), k = field(line, "\"repeat\"");
        const long w = field(line, "\"warm\"");
        if (B < 1 || k < 0) {
            fprintf(stderr, "bench_grad_worker: bad request %s", line);
            return 1;
        }
        if ((size_t)B != ready) {
            if (prepare(j, (size_t)B) || gradient(j, &steps, &check))
                return 1;
            ready = (size_t)B;
        }
        for (long r = 0; r < w; ++r)
            if (gradient(j, &steps, &check))
                return 1;
        printf("{\"times\": [");
        for (long r = 0; r < k; ++r) {
            const double t0 = now();
            if (gradient(j, &steps, &check))
                return 1;
            printf("%s%.9g", r ? ", " : "", now() - t0);
        }
        printf("], \"steps\": %.17g, \"check\": %.17g}\n", steps, check);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "fp32") != 0 && strcmp(argv[1], "fp64") != 0)) {
        fprintf(stderr, "usage: bench_grad_worker fp32|fp64 DEVICE\n");
        return 1;
    }
    job j;
    memset(&j, 0, sizeof j);
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = argv[2];
    clnode_model *m = NULL;
    int rc = 1;
    if (clnode_context_create(&co, &j.ctx) != CLNODE_OK) {
        fprintf(stderr, "bench_grad_worker: no device %s\n", argv[2]);
        return 1;
    }
    co.device = "host";
    if (strncmp(argv[2], "host:openblas", 13) != 0)
        j.hctx = j.ctx;
    else if (clnode_context_create(&co, &j.hctx) != CLNODE_OK)
        goto done;
    if (clnode_model_create_seed(j.ctx, &m) != CLNODE_OK)
        goto done;
    j.m = m;
    j.N = clnode_model_dim(m);
    clnode_solve_seed_options(&j.o);
    j.o.precision = strcmp(argv[1], "fp64") == 0 ? CLNODE_FP64 : CLNODE_FP32;
    j.o.max_steps = 4096;
    j.o.keep_tape = 1;
    clnode_problem_default(&j.p);
    printf("{\"device\": \"%s\", \"version\": \"%s\"}\n", clnode_context_device(j.ctx),
           clnode_version_string());
    fflush(stdout);
    rc = serve(&j);
done:
    free(j.y0);
    free(j.cot);
    clnode_model_destroy(&m);
    if (j.hctx != j.ctx)
        clnode_context_destroy(&j.hctx);
    clnode_context_destroy(&j.ctx);
    return rc;
}
