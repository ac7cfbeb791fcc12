"""The precision guard's floor detection: it ends a trajectory only where rtol is below what the
arithmetic resolves (16 u of the probe, the bound its warning names, always above that rtol), never
at a kink of the vector field; a trajectory it ends is a failure with its unreached save slots
padded (ts and ys +inf), and through clnode.jax a failed result whose error names the floor."""
import re
import warnings

import numpy as np
import pytest

import clnode

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

from clnode.jax import diffeqsolve  # noqa: E402

RELU_Y0 = np.array([0.3, -0.2, 0.5])
RELU_TS = np.linspace(0.0, 1.0, 5)


def relu_mlp():
    return eqx.nn.MLP(3, 3, 16, 2, activation=jax.nn.relu, key=jax.random.PRNGKey(3),
                      dtype=jnp.float64)


def floor_bound(message):
    """The bound of a precision_floor warning ("a larger rtol (at least X)")."""
    m = re.search(r"at least ([0-9.e+-]+)\)", message)
    assert m, message
    return float(m.group(1))


def test_relu_kink_is_not_a_precision_floor():
    """A relu MLP in fp64 at rtol 1e-6 (far above 16 u = 1.8e-15): the error estimate rises
    across four rejections at a kink, which smaller steps resolve. The guard must not end it (it
    did, at t = 0.55 after 6 steps, advising an rtol of at least 1.78e-15): the same steps and
    bits as with the guard off, and as many steps as diffrax, to 1e-12 of its values."""
    mlp = relu_mlp()
    model = clnode.from_equinox(mlp)
    kw = dict(t0=0, t1=1, dt0=0.05, rtol=1e-6, atol=1e-9, precision="fp64",
              saveat=clnode.SaveAt(ts=RELU_TS))
    with warnings.catch_warnings():
        warnings.simplefilter("error", clnode.PrecisionWarning)
        sol = clnode.solve(model, RELU_Y0, **kw)
    off = clnode.solve(model, RELU_Y0, precision_guard="off", **kw)
    assert sol.result == clnode.Result.success, (sol.result, sol.t_final, sol.stats)
    assert sol.stats["num_steps"] == off.stats["num_steps"] == 8
    assert sol.stats["num_rejected_steps"] == 4
    np.testing.assert_array_equal(sol.ys, off.ys)
    np.testing.assert_array_equal(sol.ts, RELU_TS)
    ref = diffrax.diffeqsolve(diffrax.ODETerm(lambda t, y, a: mlp(y)), diffrax.Tsit5(), 0.0, 1.0,
                              0.05, jnp.asarray(RELU_Y0),
                              stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
                              saveat=diffrax.SaveAt(ts=jnp.asarray(RELU_TS)))
    assert int(ref.stats["num_steps"]) == 8
    np.testing.assert_allclose(sol.ys, np.asarray(ref.ys), rtol=0, atol=1e-12)
    # the drop-in, which reported it as diffrax's max_steps_reached after 6 of 4096 steps
    got = diffeqsolve(diffrax.ODETerm(lambda t, y, a: mlp(y)), diffrax.Tsit5(), 0.0, 1.0, 0.05,
                      jnp.asarray(RELU_Y0),
                      stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-9),
                      saveat=diffrax.SaveAt(ts=jnp.asarray(RELU_TS)))
    assert got.result == diffrax.RESULTS.successful and int(got.stats["num_steps"]) == 8
    np.testing.assert_array_equal(np.asarray(got.ys), sol.ys)


def test_no_floor_at_an_rtol_the_arithmetic_resolves(repo):
    """tanh4x32 (large weights, rounding-sensitive) in fp64 at rtol 1e-3, 16 u = 1.8e-15: the
    floor detection once ended it at t = 8.7 after 70 steps; it runs to t1 as unguarded."""
    model = clnode.MLP.load(repo / "tests/data/models/tanh4x32.safetensors")
    y0 = np.array([0.5, -0.3, 0.2, 0.1])
    kw = dict(t0=0, t1=50, dt0=0.01, rtol=1e-3, atol=1e-6, precision="fp64")
    with warnings.catch_warnings():
        warnings.simplefilter("error", clnode.PrecisionWarning)
        sol = clnode.solve(model, y0, **kw)
    off = clnode.solve(model, y0, precision_guard="off", **kw)
    assert sol.result == clnode.Result.success and sol.t_final == 50.0
    assert sol.stats["num_steps"] == off.stats["num_steps"]
    np.testing.assert_array_equal(sol.ys, off.ys)


@pytest.mark.parametrize("precision,tol", [("fp32", 1e-9), ("fp64", 1e-18)])
def test_a_real_floor_names_a_bound_above_its_rtol(precision, tol):
    """The seed problem far below 16 u stops at the floor on the host: its warning's bound is
    above the rtol it refuses, t_final is before t1, and the save times it did not reach are
    padding in ts and ys alike (+inf, as diffrax pads), every reached one finite data."""
    ts = np.linspace(0.0, 50.0, 11)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always", clnode.PrecisionWarning)
        sol = clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=tol,
                           atol=tol, precision=precision, max_steps=100000, device="host",
                           saveat=clnode.SaveAt(ts=ts))
    assert sol.result == clnode.Result.precision_floor, (sol.result, sol.stats)
    floor = [str(w.message) for w in rec if "precision_floor:" in str(w.message)]
    assert len(floor) == 1, [str(w.message) for w in rec]
    assert f"rtol {tol:g} " in floor[0]
    assert floor_bound(floor[0]) > tol
    assert sol.t_final < 50.0
    reached = ts <= sol.t_final
    assert 0 < reached.sum() < len(ts)
    np.testing.assert_array_equal(sol.ts[reached], ts[reached])
    assert np.all(np.isfinite(sol.ys[reached]))
    assert np.all(np.isposinf(sol.ts[~reached])) and np.all(np.isposinf(sol.ys[~reached]))


def seed_func32():
    mlp = eqx.nn.MLP(10, 10, 100, 2, activation=jax.nn.softplus, key=jax.random.PRNGKey(42),
                     dtype=jnp.float32)
    return lambda t, y, args: mlp(y)


def seed_tf32(throw):
    """The seed problem's solve as its script runs it (float32), with tf32 products."""
    return diffeqsolve(diffrax.ODETerm(seed_func32()), diffrax.Tsit5(), jnp.float32(0.0),
                       jnp.float32(50.0), jnp.float32(0.02), jnp.zeros(10, jnp.float32),
                       throw=throw, gemm_precision="tf32",
                       stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
                       saveat=diffrax.SaveAt(t1=True))


def check_floor_message(text):
    assert "precision_floor" in text and "rtol 0.0001 " in text, text
    assert floor_bound(text) > 1e-4, text
    assert "max_steps" not in text, text


@pytest.mark.filterwarnings("ignore::clnode.PrecisionWarning")
def test_jax_floor_is_dt_min_reached_and_raises_its_own_message():
    """The seed problem with tf32 products at rtol 1e-4 (below 16 u of TF32) stops at the floor
    after 76 of 4096 steps. throw=False: diffrax's dt_min_reached (the code of a controller that
    cannot meet the tolerance by shrinking the step), not max_steps_reached; throw=True (eagerly
    and under jax.jit): the library's message, naming the floor, the rtol and the bound."""
    sol = seed_tf32(False)
    assert sol.result == diffrax.RESULTS.dt_min_reached
    assert int(sol.stats["num_steps"]) < 4096
    # SaveAt(t1=True) saves where the trajectory stopped, as diffrax's does: data, not padding
    assert 0.0 < float(sol.ts[0]) < 50.0 and np.all(np.isfinite(np.asarray(sol.ys)))
    with pytest.raises(clnode.PrecisionError) as e:
        seed_tf32(True)
    check_floor_message(str(e.value))
    with pytest.raises(Exception) as e:
        jax.block_until_ready(jax.jit(lambda: seed_tf32(True).ys)())
    check_floor_message(str(e.value))
