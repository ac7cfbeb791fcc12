/* device_reverse.h - the reverse pass of the device backends (clnode/gradient.h), written once
 * over their launch tables (device_proto.h: rev_launch, memory) and their ops (buffers, the
 * ordered GEMM).
 *
 * The kernels are cl/cln_reverse_kernels.h's, the products the backend's gemm op: the same
 * functions of cl/ and the same ordered sums as the host's reverse pass
 * (lib/backends/host/host_reverse.inc), so the gradient's bits are the host's. Where the host
 * takes one block of CLNODE_GRADIENT_BLOCK trajectories at a time, a device takes a group of
 * blocks together: its rows sorted so that the rows still going back at a reverse step are the
 * first ones and every product runs over them alone; each block's parameter sums are taken by the
 * sum kernels in the order clnode/gradient.h states.
 *
 * Memory: the model's weights (and their transposes) for the whole pass; per group its scratch
 * (per trajectory about stages x (2 x the layers' widths + 3 x dim + the first layer's inputs)
 * values, and a copy of the parameters per block) and its trajectories' part of the tape, the
 * cotangents and the save times, uploaded when the group begins (the tape stays on the host
 * between groups). The group's size is chosen for the device's memory (half of it, no buffer
 * over the largest it allocates); a single block that does not fit is an error naming the bytes
 * and the remedy (a larger checkpoint_every keeps fewer states). */
#ifndef CLN_DEVICE_REVERSE_H
#define CLN_DEVICE_REVERSE_H

#include "backends/device/device_proto.h"
#include "backends/model_view.h"

/* The reverse ops of cln_backend_ops (backend.h) for a device backend. */
clnode_status cln_dev_rev_begin(cln_backend *be, const cln_rev_job *job, void **state,
                                size_t *group, const cln_rev_ops **rev);
clnode_status cln_dev_rev_each(cln_backend *be, void *state, size_t block0, size_t nblocks,
                               void *theta, cln_rev_run_fn fn, const void *arg);
void cln_dev_rev_end(cln_backend *be, void *state);

#define CLN_DEV_REV_OPS                                                                            \
    .rev_begin = cln_dev_rev_begin, .rev_each = cln_dev_rev_each, .rev_end = cln_dev_rev_end,      \
    .rev_device_arrays = 1

#endif /* CLN_DEVICE_REVERSE_H */
