#!/usr/bin/env python3
"""Per-call overhead of clnode.solve over the C library's clnode_solve, at batch 1.

    python bench/bench_python_overhead.py py N     # N calls of clnode.solve (seed model, 1 step)
    python bench/bench_python_overhead.py ext N    # N calls of the extension's Context.solve

Wall-clock figures on a shared machine are noise; count instructions instead:

    valgrind --tool=callgrind --callgrind-out-file=/dev/null python ... py 0     # Collected: A
    valgrind --tool=callgrind --callgrind-out-file=/dev/null python ... py 300   # Collected: B
    (B - A) / 300 = instructions per clnode.solve call; the same with
    --toggle-collect=clnode_solve counts the library's share, the rest is the overhead.

Needs the package installed (pip install .); run with OMP_NUM_THREADS=1.
"""
import sys

import numpy as np

import clnode
from clnode import _clnode

model = clnode.seed_model()
y = np.zeros(10)
y2 = y.reshape(1, -1)
kw = dict(t0=0.0, t1=0.02, dt0=0.02, rtol=1e-4, atol=1e-6)  # one Tsit5 step
ctx = clnode.Context("host")
for _ in range(20):  # the first solve also runs the GEMM probe
    clnode.solve(model, y, context=ctx, **kw)
n = int(sys.argv[2])
if sys.argv[1] == "py":
    for _ in range(n):
        clnode.solve(model, y, context=ctx, **kw)
else:
    for _ in range(n):
        _clnode.Context.solve(ctx, model._m, y2, **kw)
