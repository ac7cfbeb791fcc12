"""clnode.jax under jax.jit: the forward solve and the reverse pass are clnode's XLA custom calls
(python/clnode/_clnode_xla.c), with no Python per call. Their outputs and gradients are the
same bits as the eager path's (which solves through clnode.solve in Python, as the callback
did); the lowered training step holds the custom calls and no callback; the tape registry hits
in a training step's steady state and its bound in bytes holds; two threads training at once
give the bits each gives alone; the library's errors keep their message; Ctrl-C stops a jitted
gradient as KeyboardInterrupt and the next call gives the same bits."""
import os
import signal
import threading
import time

import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

if hasattr(jax, "enable_x64"):
    enable_x64 = jax.enable_x64
else:  # jax < 0.8: the oldest supported
    from jax.experimental import enable_x64


class Field(eqx.Module):
    mlp: eqx.nn.MLP
    scale: jax.Array

    def __call__(self, t, y, args):
        return self.scale * self.mlp(jnp.concatenate([y, args]))


def field(dtype, n=3, k=2, width=16):
    mlp = eqx.nn.MLP(n + k, n, width, 2, activation=jnp.tanh, key=jax.random.PRNGKey(1),
                     dtype=dtype)
    mlp = jax.tree_util.tree_map(lambda x: 2.0 * x if eqx.is_array(x) else x, mlp)
    return Field(mlp, jnp.asarray([0.9, -1.1, 1.3], dtype))


def solve(f, y0, args, ts, t1=1.5, rtol=1e-5, max_steps=4096, **kw):
    return diffeqsolve(diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, t1, 0.05, y0, args,
                       stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol * 1e-2),
                       saveat=diffrax.SaveAt(ts=ts), max_steps=max_steps, **kw)


def loss(f, y0s, args, ts, w):
    ys = jax.vmap(lambda y, c: solve(f, y, c, ts).ys)(y0s, args)
    return jnp.sum(w * ys)


def problem(dtype, B=5):
    rng = np.random.default_rng(7)
    y0s = jnp.asarray(rng.standard_normal((B, 3)), dtype)
    args = jnp.asarray(rng.standard_normal((B, 2)), dtype)
    ts = jnp.asarray(np.linspace(0.1, 1.5, 6), dtype)
    w = jnp.asarray(rng.standard_normal((B, 6, 3)), dtype)
    return field(dtype), y0s, args, ts, w


def flat(tree):
    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree) if eqx.is_array(x)]


def assert_same_bits(a, b):
    for x, y in zip(flat(a), flat(b), strict=True):
        np.testing.assert_array_equal(x, y)


vg = eqx.filter_value_and_grad(loss)
jit_vg = eqx.filter_jit(eqx.filter_value_and_grad(loss))


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_jitted_gradient_is_the_eager_paths_bits(dtype):
    """The custom calls (jit) against the eager path (clnode.solve and Solution.vjp in Python,
    as the callback ran them), every leaf: the loss, the MLP's, the factor's; and the forward's
    ys, steps and result codes."""
    with enable_x64(dtype == jnp.float64):
        f, y0s, args, ts, w = problem(dtype)
        before = clnode.jax.tape_stats()
        got = jit_vg(f, y0s, args, ts, w)
        after = clnode.jax.tape_stats()
        assert after["solves"] - before["solves"] == 1
        want = vg(f, y0s, args, ts, w)  # eager: no custom call
        assert clnode.jax.tape_stats()["solves"] == after["solves"]
        # the gradient bit for bit (the loss is XLA's sum, fused otherwise under jit)
        assert_same_bits(got[1], want[1])
        np.testing.assert_allclose(float(got[0]), float(want[0]), rtol=1e-6)
        one = jax.jit(lambda y, c: solve(f, y, c, ts))
        for b in range(2):
            s_jit, s_eager = one(y0s[b], args[b]), solve(f, y0s[b], args[b], ts)
            np.testing.assert_array_equal(np.asarray(s_jit.ys), np.asarray(s_eager.ys))
            np.testing.assert_array_equal(np.asarray(s_jit.ts), np.asarray(s_eager.ts))
            assert int(s_jit.stats["num_steps"]) == int(s_eager.stats["num_steps"])
            assert s_jit.result == s_eager.result == diffrax.RESULTS.successful


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_values_in_the_subnormal_range_keep_their_bits_under_jit(dtype):
    """XLA runs a jitted program with subnormals flushed (x86's FTZ and DAZ): the custom calls
    compute in IEEE's default environment all the same, as the eager path does (lib/core/fpenv.h).
    A field whose output layer has zero weights and a subnormal bias grows y from 0 through the
    subnormal range: ys and the gradient under jit are the eager path's bits (flushed, ys would be
    zeros)."""
    with enable_x64(dtype == jnp.float64):
        tiny = 3e-39 if dtype == jnp.float32 else 3e-310
        f, y0s, args, ts, w = problem(dtype)
        last = f.mlp.layers[-1]
        f = eqx.tree_at(lambda g: (g.mlp.layers[-1].weight, g.mlp.layers[-1].bias), f,
                        (jnp.zeros_like(last.weight), jnp.full(last.bias.shape, tiny, dtype)))
        y0s = jnp.zeros_like(y0s)
        one = jax.jit(lambda y, c: solve(f, y, c, ts).ys)
        ys_jit = np.asarray(one(y0s[0], args[0]))
        ys_eager = np.asarray(solve(f, y0s[0], args[0], ts).ys)
        assert np.any((ys_eager != 0) & (np.abs(ys_eager) < np.finfo(ys_eager.dtype).tiny))
        np.testing.assert_array_equal(ys_jit, ys_eager)
        assert_same_bits(jit_vg(f, y0s, args, ts, w)[1], vg(f, y0s, args, ts, w)[1])


def test_per_example_gradients_are_the_eager_paths_bits():
    """vmap of a gradient (one reverse pass per example, re-solved: the batching rule keeps the
    examples' parameter gradients apart)."""
    with enable_x64(True):
        f, y0s, args, ts, w = problem(jnp.float64, B=4)
        params, static = eqx.partition(f, eqx.is_inexact_array)

        def one(p, y, c, wi):
            return loss(eqx.combine(p, static), y[None], c[None], ts, wi[None])

        per = jax.vmap(jax.grad(one), in_axes=(None, 0, 0, 0))
        got = jax.jit(per)(params, y0s, args, w)
        want = per(params, y0s, args, w)
        assert_same_bits(got, want)
        # each example's alone (the same bits as in the batch)
        alone = jax.grad(one)(params, y0s[2], args[2], w[2])
        for g, a in zip(flat(got), flat(alone), strict=True):
            np.testing.assert_array_equal(g[2], a)


def test_lowered_training_step_holds_the_custom_calls_and_no_callback():
    """throw=False: with throw=True diffrax's own eqx.error_if adds a Python callback in the
    branch taken on a failed trajectory, as it does for diffrax.diffeqsolve."""
    f, y0s, args, ts, w = problem(jnp.float32)
    params, static = eqx.partition(f, eqx.is_inexact_array)

    def lo(q, y0s, args, w):
        ys = jax.vmap(lambda y, c: solve(eqx.combine(q, static), y, c, ts, throw=False).ys)(
            y0s, args)
        return jnp.sum(w * ys)

    def step(p, y0s, args, w):
        value, g = jax.value_and_grad(lo)(p, y0s, args, w)
        return value, jax.tree_util.tree_map(lambda a, b: a - 1e-3 * b, p, g)

    text = jax.jit(step).lower(params, y0s, args, w).as_text()
    assert text.count("custom_call @clnode_solve_fwd") == 1
    assert text.count("custom_call @clnode_solve_vjp") == 1
    assert "callback" not in text.lower()


def test_training_steady_state_hits_every_tape_and_the_bound_holds():
    f, y0s, args, ts, w = problem(jnp.float32, B=32)
    jit_vg(f, y0s, args, ts, w)  # compiled
    before = clnode.jax.tape_stats()
    outs = [jit_vg(f, y0s, args, ts, w) for _ in range(3)]
    after = clnode.jax.tape_stats()
    assert after["hits"] - before["hits"] == 3 and after["misses"] == before["misses"]
    # the handlers' whole time holds the library's: their own work is the difference
    d = {k: after[k] - before[k] for k in ("solves", "vjps", "reverses", "fwd_ns", "vjp_ns",
                                            "solve_ns", "reverse_ns")}
    assert d["solves"] == d["vjps"] == d["reverses"] == 3
    assert d["fwd_ns"] >= d["solve_ns"] > 0 and d["vjp_ns"] >= d["reverse_ns"] > 0
    assert after["tapes"] == before["tapes"]  # each taken by its reverse pass
    # a bound below one tape: nothing kept, every reverse pass re-solves, the same bits
    old = clnode.jax.set_tape_limit(1000)
    try:
        assert old == clnode.jax.tape_stats()["limit"] or old > 0
        miss = clnode.jax.tape_stats()["misses"]
        again = jit_vg(f, y0s, args, ts, w)
        st = clnode.jax.tape_stats()
        assert st["misses"] == miss + 1 and st["bytes"] <= 1000
    finally:
        clnode.jax.set_tape_limit(old)
    for o in outs:
        assert_same_bits(o, again)  # the same program each time: the loss too
    with pytest.raises(ValueError, match="bytes"):
        clnode.jax.set_tape_limit(-1)


def test_forwards_whose_gradient_never_comes_stay_within_the_bound():
    """jax.linearize keeps tapes whose reverse pass never runs: the registry drops the oldest
    beyond its bound in bytes."""
    f, y0s, args, ts, w = problem(jnp.float32, B=64)
    fwd = eqx.filter_jit(lambda f, y0s: jax.linearize(lambda y: loss(f, y, args, ts, w), y0s)[0])
    fwd(f, y0s)
    st = clnode.jax.tape_stats()
    fwd(f, y0s)
    one = clnode.jax.tape_stats()["bytes"] - st["bytes"]
    assert one > 0 and clnode.jax.tape_stats()["tapes"] == st["tapes"] + 1
    old = clnode.jax.set_tape_limit(3 * one)
    try:
        for _ in range(6):
            fwd(f, y0s)
        st = clnode.jax.tape_stats()
        assert st["bytes"] <= 3 * one and st["tapes"] <= 3
    finally:
        clnode.jax.set_tape_limit(old)


def test_two_threads_training_at_once_give_the_bits_of_each_alone():
    f, y0s, args, ts, w = problem(jnp.float32, B=16)
    f2 = jax.tree_util.tree_map(lambda x: 0.9 * x if eqx.is_array(x) else x, f)
    alone = [jit_vg(g, y0s, args, ts, w) for g in (f, f2)]
    got = [[], []]

    def train(i, g):
        for _ in range(6):
            got[i].append(jit_vg(g, y0s, args, ts, w))

    threads = [threading.Thread(target=train, args=(i, g)) for i, g in enumerate((f, f2))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(2):
        assert len(got[i]) == 6
        for o in got[i]:
            assert_same_bits(o, alone[i])


def test_library_errors_keep_their_message_under_jit_and_their_type_eagerly():
    f, y0s, args, ts, w = problem(jnp.float64)

    def bad(t1s):  # two directions of integration in one solve: refused by the library
        return jax.vmap(lambda t1, y, c: diffeqsolve(
            diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, t1, None, y, c,
            stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6)).ys)(
                t1s, y0s[:2], args[:2])

    t1s = jnp.array([1.0, -1.0])
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        jax.block_until_ready(jax.jit(bad)(t1s))
    msg = str(e.value)
    assert "INVALID_ARGUMENT" in msg and "one direction of integration" in msg
    assert "clnode.InvalidArgumentError" in msg and "callback" not in msg.lower()
    # the library's message comes first, then the exception clnode.solve raises
    assert msg.index("one direction") < msg.index("clnode.InvalidArgumentError")
    with pytest.raises(clnode.InvalidArgumentError, match="one direction of integration"):
        bad(t1s)


def test_ctrl_c_stops_a_jitted_gradient_and_the_next_call_gives_the_same_bits():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread")
    with enable_x64(True):
        f, y0s, args, ts, w = problem(jnp.float64, B=2)
        big = jnp.tile(y0s, (2048, 1))
        bargs = jnp.tile(args, (2048, 1))
        bw = jnp.tile(w, (2048, 1, 1))
        run = eqx.filter_jit(eqx.filter_grad(
            lambda f, y, c, ww: jnp.sum(ww * jax.vmap(lambda a, b: solve(
                f, a, b, ts, t1=1.5, rtol=1e-12, max_steps=100000).ys)(y, c))))
        small = (f, y0s, args, w)
        want = run(*small)
        t = time.perf_counter()
        jax.block_until_ready(run(f, big, bargs, bw))  # compiled, and timed
        took = time.perf_counter() - t
        if took < 0.5:
            pytest.skip(f"the long gradient takes {took:.2f} s only")
        timer = threading.Timer(took / 4, lambda: os.kill(os.getpid(), signal.SIGINT))
        t = time.perf_counter()
        timer.start()
        with pytest.raises(KeyboardInterrupt):
            jax.block_until_ready(run(f, big, bargs, bw))
            time.sleep(1.0)  # the interrupt is delivered at the next bytecode
        stopped = time.perf_counter() - t
        timer.join()
        assert stopped < 0.75 * took + 0.3, (stopped, took)
        assert_same_bits(run(*small), want)


PMAP = """
import os, sys
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
sys.path.insert(0, {here!r})
from test_jax_ffi import *
f, y0s, args, ts, w = problem(jnp.float32, B=4)
one = lambda y, c: solve(f, y, c, ts).ys
want = jax.vmap(one)(y0s, args)
got = jax.block_until_ready(jax.pmap(jax.vmap(one))(y0s.reshape(2, 2, 3), args.reshape(2, 2, 2)))
assert len(jax.devices()) == 2 and clnode.jax.tape_stats()["solves"] == 2
np.testing.assert_array_equal(np.asarray(got).reshape(want.shape), want)
mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
P = jax.sharding.PartitionSpec
kw = {{}}
if hasattr(jax, "shard_map"):
    shard_map = jax.shard_map
else:  # jax < 0.7: its shard_map has no replication rule for a custom primitive
    from jax.experimental.shard_map import shard_map
    kw = dict(check_rep=False)
sm = shard_map(jax.vmap(one), mesh=mesh, in_specs=(P("i"), P("i")), out_specs=P("i"), **kw)
np.testing.assert_array_equal(np.asarray(jax.jit(sm)(y0s, args)), want)
g = jax.grad(lambda y, c, ww: loss(f, y, c, ts, ww))
gp = jax.pmap(g)(y0s.reshape(2, 2, 3), args.reshape(2, 2, 2), w.reshape(2, 2, 6, 3))
np.testing.assert_array_equal(np.asarray(gp).reshape(4, 3), np.concatenate(
    [g(y0s[:2], args[:2], w[:2]), g(y0s[2:], args[2:], w[2:])]))
print("ok")
"""


def test_pmap_and_shard_map_over_two_cpu_devices():
    """Each device's shard is one custom call on its own context: the bits of the shards solved
    alone (in a fresh process: the device count is fixed when JAX starts)."""
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    out = subprocess.run([sys.executable, "-c", PMAP.format(here=here)], capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-3000:]
