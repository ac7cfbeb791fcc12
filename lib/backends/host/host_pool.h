/* host_pool.h - the host backend's thread pool (lib/backends/host/host_pool.c).
 *
 * A fixed set of worker threads that sleep on a condition variable between jobs: a worker that
 * finished its part watches for the next job for at most 50 us, yielding the CPU at every look
 * (a solve hands out one a step, a few microseconds apart, and waking a sleeping thread costs far
 * more), then sleeps, costing no CPU time; so on a machine shared with other busy processes the
 * pool never holds a core it has no work for (an OpenMP runtime's spinning threads did, which
 * made run times vary many-fold).
 * The caller's thread runs part 0 of every job itself and waits for the others the same way; a
 * job of one part runs inline, without touching the workers. Workers start on the first job
 * that needs them. */
#ifndef CLN_HOST_POOL_H
#define CLN_HOST_POOL_H

#include <stddef.h>

typedef struct cln_pool cln_pool;

/* One part of a job: fn(arg, part, parts) for part = 0 .. parts - 1, each exactly once. */
typedef void (*cln_pool_fn)(void *arg, size_t part, size_t parts);

/* The pool's thread count when the caller does not set one: CLNODE_NUM_THREADS when it holds a
 * positive integer, else the CPUs this process may run on (its affinity mask). */
int cln_pool_default_threads(void);

/* A pool of `threads` threads in all (the caller's and threads - 1 workers); threads >= 1.
 * Returns NULL when out of memory. */
cln_pool *cln_pool_create(int threads);

/* Stops and joins the workers. Accepts NULL. */
void cln_pool_destroy(cln_pool *pool);

/* The thread count the pool was created with. */
int cln_pool_threads(const cln_pool *pool);

/* Runs the parts of a job (1 <= parts <= cln_pool_threads) and returns when all are done. Part 0
 * runs on the calling thread. When a worker cannot be started the caller runs its part too:
 * every part still runs exactly once. One job at a time per pool (a pool belongs to one
 * context, which is not used from two threads at once). */
void cln_pool_run(cln_pool *pool, size_t parts, cln_pool_fn fn, void *arg);

/* The number of parts for `rows` independent rows of `work_per_row` units each: one part per
 * `min_work` units (and at least `min_rows` rows per part), at most the pool's threads. */
size_t cln_pool_parts(const cln_pool *pool, size_t rows, size_t work_per_row, size_t min_work,
                      size_t min_rows);

#endif /* CLN_HOST_POOL_H */
