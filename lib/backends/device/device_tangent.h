/* device_tangent.h - the tangent pass of the device backends (clnode/tangent.h), written once
 * over their launch tables (device_proto.h: rev_launch, memory) and their ops (buffers, the
 * ordered GEMM), on the reverse pass's recomputation of the steps (device_reverse.h).
 *
 * The kernels are cl/cln_tangent_kernels.h's beside cl/cln_reverse_kernels.h's, the products the
 * backend's ordered GEMM: the same functions of cl/ and the same ordered sums as the host's
 * tangent pass (lib/backends/host/host_tangent.inc), so the tangents' bits are the host's. A
 * group of blocks goes forwards together, its rows ordered by their steps as the reverse pass
 * orders them, each row carrying the chunk's directions as consecutive tangent rows.
 *
 * Memory: the reverse pass's (device_reverse.h), and per group its tangent rows: per trajectory
 * and direction about stages x (the first layer's inputs + dim) + 2 x the widest layer + (2 +
 * slots) x dim values, and the parameters' directions; a group whose tangent rows need more than
 * a quarter of the device's memory is an error naming the bytes and the remedy (fewer directions
 * at a time: a smaller max_bytes). */
#ifndef CLN_DEVICE_TANGENT_H
#define CLN_DEVICE_TANGENT_H

#include "backends/device/device_reverse.h"

/* The tangent ops of cln_backend_ops (backend.h) for a device backend. */
clnode_status cln_dev_tan_begin(cln_backend *be, const cln_tan_job *job, void **state,
                                size_t *group, const cln_tan_ops **tan);
clnode_status cln_dev_tan_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                               cln_rev_run_fn fn, const void *arg);
void cln_dev_tan_end(cln_backend *be, void *state);

#define CLN_DEV_TAN_OPS                                                                            \
    .tan_begin = cln_dev_tan_begin, .tan_each = cln_dev_tan_each, .tan_end = cln_dev_tan_end

#endif /* CLN_DEVICE_TANGENT_H */
