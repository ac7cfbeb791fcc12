"""The memory of a vmapped gradient through clnode.jax.diffeqsolve (issue: training in JAX): at
B = 4096 trajectories of the seed model (10-100-100-10, |theta| = 12,310), the parameters'
cotangent is summed inside clnode. No intermediate of the lowered program has a batch axis times
as many values as the smallest weight matrix, the compiled program's scratch is far below
B x |theta|, and the process's resident memory rises by much less than B x |theta| over the
forward's."""
import threading
import time

import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

from clnode.jax import diffeqsolve  # noqa: E402
from test_jax import seed_func  # noqa: E402  (the seed model as an equinox module)

B = 4096


def solve(func, y0):
    return diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 1.0, 0.05, y0,
                       stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                       saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 4))).ys


def loss(func, y0s):
    return jnp.mean(jax.vmap(solve, in_axes=(None, 0))(func, y0s) ** 2)


def _avals(jaxpr):
    """Every variable's abstract value in a jaxpr and the jaxprs inside its equations."""
    for eqn in jaxpr.eqns:
        for v in eqn.outvars:
            yield v.aval
        for p in eqn.params.values():
            for sub in (p if isinstance(p, (tuple, list)) else (p,)):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _avals(inner)


def _rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def _peak_rss_during(fn):
    """The largest resident set size sampled while fn runs, and fn's result."""
    peak, done = [_rss()], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _rss())
            time.sleep(0.001)

    t = threading.Thread(target=sample)
    t.start()
    try:
        out = jax.block_until_ready(fn())
    finally:
        done.set()
        t.join()
    return max(peak[0], _rss()), out


def test_vmapped_gradient_has_no_batch_times_parameters_intermediate():
    func = seed_func()
    y0s = jax.random.normal(jax.random.PRNGKey(0), (B, 10), jnp.float32)
    leaves = [x for x in jax.tree_util.tree_leaves(func) if eqx.is_inexact_array(x)]
    n_theta = sum(x.size for x in leaves)
    smallest = min(x.size for x in leaves if x.ndim == 2)
    grad = eqx.filter_jit(eqx.filter_grad(loss))

    params, static = eqx.partition(func, eqx.is_inexact_array)
    jaxpr = jax.make_jaxpr(lambda p, y: eqx.filter_grad(loss)(eqx.combine(p, static), y))(
        params, y0s)
    worst = max((a.size // B for a in _avals(jaxpr.jaxpr)
                 if hasattr(a, "shape") and B in a.shape), default=0)
    assert worst < smallest, (worst, smallest)

    compiled = jax.jit(lambda p, y: eqx.filter_grad(loss)(eqx.combine(p, static), y)).lower(
        params, y0s).compile()
    mem = compiled.memory_analysis()
    if mem is not None:
        assert mem.temp_size_in_bytes < B * n_theta * 4 // 20, mem.temp_size_in_bytes

    forward = eqx.filter_jit(loss)
    jax.block_until_ready(forward(func, y0s))  # compiled, caches warm
    jax.block_until_ready(grad(func, y0s))
    base = _rss()
    peak_forward, _ = _peak_rss_during(lambda: forward(func, y0s))
    peak_grad, g = _peak_rss_during(lambda: grad(func, y0s))
    rise = peak_grad - max(base, peak_forward)
    # B x |theta| in float32 is 200 MB: the gradient's own memory (the tape of 4096
    # trajectories, the reverse pass's blocks) measures 10-24 MB, with the allocator's and the
    # sampling's noise; one array of B x |theta| would add at least 200 MB
    assert rise < B * n_theta * 4 // 2, (rise, B * n_theta * 4)
    assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(g)
               if eqx.is_array(x))
    print(f"B={B} |theta|={n_theta}: largest per-trajectory intermediate {worst} values, "
          f"compiled scratch {None if mem is None else mem.temp_size_in_bytes} B, RSS rise "
          f"over the forward {rise / 1e6:.1f} MB (B x |theta| = {B * n_theta * 4 / 1e6:.0f} MB)")
