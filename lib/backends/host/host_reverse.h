/* host_reverse.h - the host's reverse pass (lib/backends/host/host_reverse.inc), per precision:
 * a block of trajectories at a time, back through their kept steps. */
#ifndef CLN_HOST_REVERSE_H
#define CLN_HOST_REVERSE_H

#include <stddef.h>

#include "backends/backend.h"
#include "backends/host/host_gemm.h"

typedef struct cln_host_rev cln_host_rev;
struct cln_host_tan;

/* A run of the schedule on the host: a block on thread `thread`, its parameter cotangent into
 * theta (ntheta values, overwritten); for the tangent pass (host_tangent.h), its chunk's tangent
 * scratch (else NULL). */
typedef struct cln_host_rev_run {
    cln_host_rev *h;
    size_t thread;
    void *theta;
    struct cln_host_tan *tan;
} cln_host_rev_run;

/* begin: what every block reads (the packed weights for the recomputed products and for their
 * transposes) and the scratch of `threads` threads, for a job that lives until end; NULL when
 * out of memory (*bytes: what it asked for). ops: the per-step reverse operations (cln_rev_ops,
 * backend.h) on a cln_host_rev_run (thread < threads). The bits do not depend on the thread nor
 * on the ISA. */
#define CLN_HOST_REV_DECLARE(sfx)                                                                  \
    cln_host_rev *cln_host_rev_begin_##sfx(const cln_rev_job *job, cln_gemm_isa isa,               \
                                           size_t threads, size_t *bytes);                         \
    extern const cln_rev_ops cln_host_rev_ops_##sfx;                                               \
    void cln_host_rev_end_##sfx(cln_host_rev *h);
CLN_HOST_REV_DECLARE(f32)
CLN_HOST_REV_DECLARE(f64)

#endif /* CLN_HOST_REVERSE_H */
