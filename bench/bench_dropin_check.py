#!/usr/bin/env python3
"""What clnode.jax.diffeqsolve's check of the vector field costs on every call.

    python bench/bench_dropin_check.py [ROUNDS]

The neural ODE example's forward pass (`out_scale * mlp(y)`, MLP 2 -> 64 -> 64 -> 2 with
softplus and a final tanh, Tsit5, PIDController(rtol=1e-3, atol=1e-6), SaveAt(ts) of 100 times,
jax.vmap over 32 initial states, float64) through the drop-in, jitted two ways:

* `constant`: the model closed over as a constant; the field's values at the check points and
  its factor s are computed once, when the function is traced, and compared there;
* `traced`: the model passed as an argument of the jitted function, as a training loop passes
  it; every call evaluates the field and its factor at the check points in JAX, hands them to
  the callback, which builds the model with that call's parameters and scale and compares.

Both solve the same problem with the same bits (checked). `diffrax` is diffrax.diffeqsolve on
the same problem, jitted as `traced`, for scale. Rounds alternate between the three and the
ratios of the medians are printed: the cost of checking on every call, relative to a call that
does not, and diffrax's time relative to the drop-in's. Run on a quiet machine; the ratios are
from one run.

Needs jax, equinox, diffrax and the package installed (pip install .).
"""
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import diffrax
import equinox as eqx

from clnode.jax import diffeqsolve

jax.config.update("jax_enable_x64", True)


class Func(eqx.Module):
    out_scale: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.out_scale * self.mlp(y)


def forward(func, ts, y0, solve=diffeqsolve):
    def one(y):
        return solve(diffrax.ODETerm(func), diffrax.Tsit5(), ts[0], ts[-1], ts[1] - ts[0],
                           y, stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                           saveat=diffrax.SaveAt(ts=ts)).ys
    return jax.vmap(one)(y0)


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    mlp = eqx.nn.MLP(2, 2, 64, 2, activation=jax.nn.softplus, final_activation=jax.nn.tanh,
                     key=jax.random.PRNGKey(0), dtype=jnp.float64)
    func = Func(jnp.asarray(0.8, jnp.float64), mlp)
    ts = jnp.linspace(0.0, 10.0, 100, dtype=jnp.float64)
    y0 = jax.random.uniform(jax.random.PRNGKey(1), (32, 2), jnp.float64, -0.6, 1.0)
    constant = jax.jit(lambda ts, y0: forward(func, ts, y0))
    traced = eqx.filter_jit(forward)
    reference = eqx.filter_jit(lambda f, ts, y0: forward(f, ts, y0, diffrax.diffeqsolve))
    runs = {"constant": lambda: constant(ts, y0), "traced": lambda: traced(func, ts, y0),
            "diffrax": lambda: reference(func, ts, y0)}
    a = np.asarray(jax.block_until_ready(runs["constant"]()))
    b = np.asarray(jax.block_until_ready(runs["traced"]()))
    assert np.array_equal(a, b), "the two ways solved different problems"
    times = {k: [] for k in runs}
    for _ in range(rounds):
        for name, run in runs.items():
            t = time.perf_counter()
            jax.block_until_ready(run())
            times[name].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"neural ODE example forward, B = 32, 100 save times, float64, {rounds} rounds")
    for name in runs:
        print(f"  {name:9s} {med[name] * 1e3:8.3f} ms per call (median)")
    print(f"  traced / constant = {med['traced'] / med['constant']:.3f} "
          f"(the check on every call: {(med['traced'] - med['constant']) * 1e3:+.3f} ms)")
    print(f"  diffrax / traced = {med['diffrax'] / med['traced']:.3f}")


if __name__ == "__main__":
    main()
