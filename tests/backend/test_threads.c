/* test_threads.c - separate contexts in separate threads: each thread creates its own context on
 * one of the devices named on the command line ("host", "opencl:pocl", ...), solves the seed
 * problem in fp32 and fp64, compares the result bit for bit with a solve of the same problem made
 * before any thread started, destroys its context, and does it again. All threads start at once
 * (a barrier), so solves, context creations and destructions of different threads overlap: on
 * OpenCL each destruction clears CLBlast's process-wide caches while other threads run GEMMs.
 *
 * Built as usual it checks the results; built with -Db_sanitize=thread (scripts/test.sh) it is the
 * test ThreadSanitizer watches (with the host backend's own thread pool in every host context).
 *
 * Usage: test_threads DEVICE... ; devices that are absent are skipped, none present: 77. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clnode.h"
#include "test_problem.h"
#include "test_device.h"

#define THREADS_PER_DEVICE 2
#define ROUNDS 2
#define BATCH 2
#define MAX_DEVICES 4

typedef struct reference {
    const char *device;
    clnode_trajectory_stats stats[2][BATCH]; /* [fp64][trajectory] */
    double y[2][BATCH][16];
    size_t dim;
    int fp64;
} reference;

typedef struct worker {
    const reference *ref;
    int id;
    char error[512]; /* empty: every solve matched */
} worker;

static pthread_barrier_t g_start;

static clnode_context *context_on(const char *device, clnode_status *st)
{
    clnode_context_options co;
    clnode_context_default_options(&co);
    co.device = device;
    clnode_context *ctx = NULL;
    *st = clnode_context_create(&co, &ctx);
    return ctx;
}

/* The seed problem, batch BATCH, in `prec`; returns the solution or NULL with `err` filled. */
static clnode_solution *seed_solve(clnode_context *ctx, clnode_precision prec, char *err, size_t n)
{
    clnode_model *m = NULL;
    clnode_status st = clnode_model_create_seed(ctx, &m);
    clnode_solution *s = NULL;
    if (st == CLNODE_OK) {
        clnode_solve_options o;
        clnode_solve_seed_options(&o);
        o.precision = prec;
        const double y0[BATCH * 10] = {0};
        st = clnode_solve(ctx, m, &o, TEST_PROBLEM(BATCH, y0), &s);
    }
    if (st != CLNODE_OK)
        snprintf(err, n, "%s: %s", clnode_status_name(st), clnode_context_last_error(ctx));
    clnode_model_destroy(&m);
    return s;
}

/* Compares a solution with the reference; fills `err` on the first difference. */
static int same_as_reference(const reference *ref, int pi, const clnode_solution *s, char *err,
                             size_t n)
{
    for (size_t b = 0; b < BATCH; ++b) {
        clnode_trajectory_stats t;
        clnode_solution_stats(s, b, &t);
        const clnode_trajectory_stats *r = &ref->stats[pi][b];
        if (t.result != r->result || t.num_steps != r->num_steps ||
            t.num_accepted != r->num_accepted || t.num_rejected != r->num_rejected) {
            snprintf(err, n, "%s %s trajectory %zu: %ld steps (%ld accepted), reference %ld (%ld)",
                     ref->device, pi ? "fp64" : "fp32", b, t.num_steps, t.num_accepted,
                     r->num_steps, r->num_accepted);
            return 0;
        }
        if (memcmp(clnode_solution_y_final(s, b), ref->y[pi][b], ref->dim * sizeof(double)) != 0) {
            snprintf(err, n,
                     "%s %s trajectory %zu: final state differs from the single-threaded "
                     "solve",
                     ref->device, pi ? "fp64" : "fp32", b);
            return 0;
        }
    }
    return 1;
}

static void *work(void *arg)
{
    worker *w = arg;
    const reference *ref = w->ref;
    pthread_barrier_wait(&g_start);
    for (int round = 0; round < ROUNDS && !w->error[0]; ++round) {
        clnode_status st;
        clnode_context *ctx = context_on(ref->device, &st);
        if (!ctx) {
            snprintf(w->error, sizeof w->error, "%s: context: %s", ref->device,
                     clnode_status_name(st));
            break;
        }
        for (int pi = 0; pi <= ref->fp64 && !w->error[0]; ++pi) {
            /* alternate the order so that threads run different precisions at once */
            const int p = (pi + w->id + round) % (ref->fp64 + 1);
            char err[384] = "";
            clnode_solution *s = seed_solve(ctx, p ? CLNODE_FP64 : CLNODE_FP32, err, sizeof err);
            if (!s)
                snprintf(w->error, sizeof w->error, "%s: solve: %s", ref->device, err);
            else if (!same_as_reference(ref, p, s, err, sizeof err))
                snprintf(w->error, sizeof w->error, "thread %d, round %d: %s", w->id, round, err);
            clnode_solution_destroy(&s);
        }
        clnode_context_destroy(&ctx);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    reference refs[MAX_DEVICES];
    int nref = 0;
    for (int a = 1; a < argc && nref < MAX_DEVICES; ++a) {
        reference *r = &refs[nref];
        memset(r, 0, sizeof *r);
        r->device = argv[a];
        clnode_status st;
        clnode_context *ctx = context_on(r->device, &st);
        if (!ctx) {
            if (test_device_absent(r->device, clnode_status_name(st)) != TEST_SKIPPED)
                return 1;
            continue;
        }
        clnode_device_facts facts;
        memset(&facts, 0, sizeof facts);
        if (clnode_device_facts_get(ctx, &facts) != CLNODE_OK)
            facts.fp64 = 0;
        r->fp64 = facts.fp64;
        for (int pi = 0; pi <= r->fp64; ++pi) {
            char err[384] = "";
            clnode_solution *s = seed_solve(ctx, pi ? CLNODE_FP64 : CLNODE_FP32, err, sizeof err);
            if (!s) {
                printf("FAIL: %s: single-threaded solve: %s\n", r->device, err);
                return 1;
            }
            r->dim = clnode_solution_dim(s);
            for (size_t b = 0; b < BATCH; ++b) {
                clnode_solution_stats(s, b, &r->stats[pi][b]);
                memcpy(r->y[pi][b], clnode_solution_y_final(s, b), r->dim * sizeof(double));
            }
            clnode_solution_destroy(&s);
        }
        printf("%s (%s): reference solves done, fp64 %s\n", r->device, clnode_context_device(ctx),
               r->fp64 ? "yes" : "no");
        clnode_context_destroy(&ctx);
        ++nref;
    }
    if (nref == 0) {
        printf("no device available: skipped\n");
        return 77;
    }

    const int nthreads = nref * THREADS_PER_DEVICE;
    worker workers[MAX_DEVICES * THREADS_PER_DEVICE];
    pthread_t tids[MAX_DEVICES * THREADS_PER_DEVICE];
    pthread_barrier_init(&g_start, NULL, (unsigned)nthreads);
    for (int i = 0; i < nthreads; ++i) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i].ref = &refs[i % nref];
        workers[i].id = i;
        if (pthread_create(&tids[i], NULL, work, &workers[i]) != 0) {
            printf("FAIL: pthread_create\n");
            return 1;
        }
    }
    int failed = 0;
    for (int i = 0; i < nthreads; ++i) {
        pthread_join(tids[i], NULL);
        if (workers[i].error[0]) {
            printf("FAIL: thread %d: %s\n", i, workers[i].error);
            failed = 1;
        }
    }
    pthread_barrier_destroy(&g_start);
    printf("%d threads, %d contexts each, on %d device(s): %s\n", nthreads, ROUNDS, nref,
           failed ? "FAILED" : "every solve bit-identical to the single-threaded one");
    return failed;
}
