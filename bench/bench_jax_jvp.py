"""Forward mode timed: jax.jacfwd of y(t1) with respect to y0 for the seed problem (the built-in
seed model: 10-100-100-10 softplus, Tsit5, t in [0, 50], dt0 0.02, PIDController(rtol 1e-4,
atol 1e-6)) over jax.vmap of B initial states, jitted, in float32 and float64:

* clnode.jax.diffeqsolve's jax.jacfwd (one tangent pass of the library with 10 directions; in
  brackets the library's time in its forward solve and in its tangent pass, tape_stats');
* diffrax.diffeqsolve's jax.jacfwd with adjoint=diffrax.ForwardMode();
* clnode.jax.diffeqsolve's jax.jacrev (10 reverse passes, its Jacobian the same to rounding).

    python3 bench/bench_jax_jvp.py [--batches 1,64,1024] [--rounds 5] [--precisions fp32,fp64]

The three sides take turns, one call each per round (compilation excluded: one untimed call
first); the figure is the median of the rounds, in milliseconds, with the ratios diffrax /
clnode and jacrev / jacfwd. diffrax's float64 needs jax_enable_x64, which this script sets (the
float32 runs pass float32 arrays). Timings on a shared machine are noisy: the load average is
printed with each table."""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)

import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "python"))
from test_jax import seed_func  # noqa: E402  (the seed model as an equinox module)


def y1(solver, f, y0, adjoint=None):
    kw = {} if adjoint is None else {"adjoint": adjoint}
    # the times in y0's dtype: with jax_enable_x64, Python floats would make a float32 y0 a
    # float64 solve
    t0, t1, dt0 = (jnp.asarray(x, y0.dtype) for x in (0.0, 50.0, 0.02))
    return solver(diffrax.ODETerm(f), diffrax.Tsit5(), t0, t1, dt0, y0,
                  stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
                  max_steps=4096, **kw).ys[-1]


def sides(f):
    """The three jitted Jacobians of y(t1) w.r.t. y0 over a batch of initial states."""
    return {
        "clnode jacfwd": jax.jit(jax.vmap(jax.jacfwd(lambda y: y1(diffeqsolve, f, y)))),
        "diffrax jacfwd": jax.jit(jax.vmap(jax.jacfwd(lambda y: y1(
            diffrax.diffeqsolve, f, y, diffrax.ForwardMode())))),
        "clnode jacrev": jax.jit(jax.vmap(jax.jacrev(lambda y: y1(diffeqsolve, f, y)))),
    }


def run(precision, batches, rounds):
    dtype = jnp.float32 if precision == "fp32" else jnp.float64
    f = seed_func()
    f = jax.tree_util.tree_map(lambda x: x.astype(dtype) if eqx.is_inexact_array(x) else x, f)
    fns = sides(f)
    lines = [f"{precision} (load {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs, median of "
             f"{rounds} rounds)",
             "| B | clnode jacfwd ms (solve + tangent pass) | diffrax jacfwd ms | clnode jacrev ms "
             "| diffrax / clnode | jacrev / jacfwd | max rel. diff. clnode vs diffrax |",
             "|---|---|---|---|---|---|---|"]
    for B in batches:
        y0s = jax.random.normal(jax.random.PRNGKey(0), (B, 10), dtype)
        outs = {k: np.asarray(jax.block_until_ready(fn(y0s))) for k, fn in fns.items()}
        times = {k: [] for k in fns}
        parts = {"solve_ns": [], "tangent_ns": []}  # the library's, in clnode's jacfwd
        for _ in range(rounds):
            for k, fn in fns.items():
                before = clnode.jax.tape_stats()
                t = time.perf_counter()
                jax.block_until_ready(fn(y0s))
                times[k].append(time.perf_counter() - t)
                if k == "clnode jacfwd":
                    after = clnode.jax.tape_stats()
                    for p in parts:
                        parts[p].append(1e-6 * (after[p] - before[p]))
        med = {k: 1e3 * statistics.median(v) for k, v in times.items()}
        lib = {p: statistics.median(v) for p, v in parts.items()}
        a, b = outs["clnode jacfwd"], outs["diffrax jacfwd"]
        diff = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
        lines.append(f"| {B} | {med['clnode jacfwd']:.1f} ({lib['solve_ns']:.1f} + "
                     f"{lib['tangent_ns']:.1f}) | {med['diffrax jacfwd']:.1f} | "
                     f"{med['clnode jacrev']:.1f} | "
                     f"{med['diffrax jacfwd'] / med['clnode jacfwd']:.2f} | "
                     f"{med['clnode jacrev'] / med['clnode jacfwd']:.2f} | {diff:.1e} |")
        print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", default="1,64,1024")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--precisions", default="fp32,fp64")
    a = ap.parse_args()
    batches = [int(b) for b in a.batches.split(",")]
    for precision in a.precisions.split(","):
        print(run(precision, batches, a.rounds), flush=True)


if __name__ == "__main__":
    main()
