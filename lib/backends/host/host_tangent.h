/* host_tangent.h - the host's tangent pass (lib/backends/host/host_tangent.inc), per precision:
 * a block of trajectories at a time, forwards through their kept steps, on the reverse pass's
 * recomputation of the steps (host_reverse.h). */
#ifndef CLN_HOST_TANGENT_H
#define CLN_HOST_TANGENT_H

#include <stddef.h>

#include "backends/backend.h"
#include "backends/host/host_reverse.h"

typedef struct cln_host_tan cln_host_tan;

/* begin: a chunk's packed weight directions and the tangent scratch of `threads` threads, beside
 * h (cln_host_rev_begin of job->rev, which it outlives not); NULL when out of memory (*bytes:
 * what it asked for). ops: the per-step tangent operations (cln_tan_ops, backend.h) on a
 * cln_host_rev_run whose tan is the chunk's. The bits do not depend on the thread nor on the ISA.
 */
#define CLN_HOST_TAN_DECLARE(sfx)                                                                  \
    cln_host_tan *cln_host_tan_begin_##sfx(const cln_tan_job *job, cln_host_rev *h,                \
                                           size_t threads, size_t *bytes);                         \
    extern const cln_tan_ops cln_host_tan_ops_##sfx;                                               \
    void cln_host_tan_end_##sfx(cln_host_tan *t);
CLN_HOST_TAN_DECLARE(f32)
CLN_HOST_TAN_DECLARE(f64)

#endif /* CLN_HOST_TANGENT_H */
