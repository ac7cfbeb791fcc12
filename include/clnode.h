/* clnode.h - umbrella header of clnode, a portable solver for batches of neural ODEs
 * dy/dt = MLP(y) with adaptive Runge-Kutta methods and diffrax 0.7.2 semantics, on the host CPU,
 * OpenCL devices and CUDA, with checkable precision. */
#ifndef CLNODE_H
#define CLNODE_H

#include "clnode/bench.h"
#include "clnode/common.h"
#include "clnode/context.h"
#include "clnode/device_gradient.h"
#include "clnode/device_solve.h"
#include "clnode/devices.h"
#include "clnode/gradient.h"
#include "clnode/method.h"
#include "clnode/model.h"
#include "clnode/precision.h"
#include "clnode/probe.h"
#include "clnode/solver.h"
#include "clnode/tangent.h"

#endif /* CLNODE_H */
