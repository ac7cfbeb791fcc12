/* host_reverse.h - the host's reverse pass (lib/backends/host/host_reverse.inc), per precision:
 * a block of trajectories at a time, back through their kept steps. */
#ifndef CLN_HOST_REVERSE_H
#define CLN_HOST_REVERSE_H

#include <stddef.h>

#include "backends/backend.h"
#include "backends/host/host_gemm.h"

typedef struct cln_host_rev cln_host_rev;

/* begin: what every block reads (the weights packed for the recomputed products and for their
 * transposes) and the scratch of `threads` threads, for a job that lives until end; NULL when
 * out of memory (*bytes: what it asked for). block: block `block` of the job on thread `thread`
 * (< threads), its parameter cotangent into theta (ntheta values, overwritten). The bits do not
 * depend on the thread nor on the ISA. */
#define CLN_HOST_REV_DECLARE(real, sfx)                                                            \
    cln_host_rev *cln_host_rev_begin_##sfx(const cln_rev_job *job, cln_gemm_isa isa,               \
                                           size_t threads, size_t *bytes);                         \
    void cln_host_rev_block_##sfx(cln_host_rev *h, size_t thread, size_t block, real *theta);      \
    void cln_host_rev_end_##sfx(cln_host_rev *h);
CLN_HOST_REV_DECLARE(float, f32)
CLN_HOST_REV_DECLARE(double, f64)

#endif /* CLN_HOST_REVERSE_H */
