"""clnode.jax.diffeqsolve against diffrax.diffeqsolve itself (float64: exact step counts), under
jax.jit and jax.vmap, and the seed problem's own script with only diffeqsolve replaced."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402


class Func(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.mlp(y)


def seed_func():
    mlp = eqx.nn.MLP(10, 10, 100, 2, activation=jax.nn.softplus, key=jax.random.PRNGKey(42),
                     dtype=jnp.float32)
    return Func(mlp)


def tanh_func():
    mlp = eqx.nn.MLP(4, 4, 16, 1, activation=jnp.tanh, key=jax.random.PRNGKey(3),
                     dtype=jnp.float64)
    return Func(mlp)


def test_seed_script_only_diffeqsolve_replaced():
    """The seed problem's script (JAX's default: x64 off, float32): same step counts at batch 1
    and under vmap at batch 2, values within 1e-3 of diffrax's float64 solution."""
    class NeuralODE(eqx.Module):
        func: Func

        def __call__(self, y0, solve=diffeqsolve):
            return solve(diffrax.ODETerm(self.func), diffrax.Tsit5(), t0=0., t1=50., dt0=0.02,
                         y0=y0, stepsize_controller=diffrax.PIDController(rtol=1e-4, atol=1e-6),
                         saveat=diffrax.SaveAt(steps=True))

    model = NeuralODE(seed_func())
    with jax.enable_x64(False):  # as the script runs: JAX's default (x64 on promotes to float64)
        one = model(jnp.zeros(10, jnp.float32))
        two = jax.vmap(model)(jnp.zeros((2, 10), jnp.float32))
    assert int(one.stats["num_steps"]) == 12
    assert list(np.asarray(two.stats["num_steps"])) == [12, 12]
    assert one.ys.shape == (4096, 10) and two.ys.shape == (2, 4096, 10)
    assert one.ys.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(two.ys[0]), np.asarray(one.ys))
    # clnode.from_equinox finds the built-in seed model in it, bit for bit
    assert clnode.from_equinox(model) == clnode.seed_model()
    f64 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float64) if eqx.is_array(x) else x,
                                 model)  # the same weights, widened exactly
    ref = f64(jnp.zeros(10, jnp.float64), solve=diffrax.diffeqsolve)
    n = int(one.stats["num_accepted_steps"])
    nr = int(ref.stats["num_accepted_steps"])
    np.testing.assert_allclose(np.asarray(one.ys[n - 1], np.float64),
                               np.asarray(ref.ys[nr - 1]), rtol=1e-3)


SAVES = [diffrax.SaveAt(t1=True), diffrax.SaveAt(t0=True, t1=True),
         diffrax.SaveAt(ts=jnp.linspace(0.0, 3.0, 7)), diffrax.SaveAt(steps=True),
         diffrax.SaveAt(t0=True, ts=jnp.array([0.5, 1.5, 2.9]), steps=True)]


@pytest.mark.parametrize("saveat", SAVES, ids=["t1", "t0t1", "ts", "steps", "t0+ts+steps"])
def test_save_modes_match_diffrax_fp64(saveat):
    func = tanh_func()
    y0 = jnp.linspace(-1.0, 1.0, 4, dtype=jnp.float64)
    kw = dict(t0=0.0, t1=3.0, dt0=0.05, y0=y0, saveat=saveat, max_steps=64,
              stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8))
    ref = diffrax.diffeqsolve(diffrax.ODETerm(func), diffrax.Dopri5(), **kw)
    got = diffeqsolve(diffrax.ODETerm(func), diffrax.Dopri5(), **kw)
    for k in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
        assert int(got.stats[k]) == int(ref.stats[k]), k
    assert got.stats["max_steps"] == ref.stats["max_steps"]
    assert got.ts.shape == ref.ts.shape and got.ys.shape == ref.ys.shape
    assert got.ts.dtype == ref.ts.dtype and got.ys.dtype == ref.ys.dtype
    fin = np.isfinite(np.asarray(ref.ts))
    np.testing.assert_array_equal(np.isfinite(np.asarray(got.ts)), fin)
    np.testing.assert_allclose(np.asarray(got.ts)[fin], np.asarray(ref.ts)[fin], rtol=1e-10)
    np.testing.assert_allclose(np.asarray(got.ys)[fin], np.asarray(ref.ys)[fin], rtol=1e-8,
                               atol=1e-10)
    assert got.result == diffrax.RESULTS.successful


def test_jit_vmap_one_batched_solve(monkeypatch):
    func = tanh_func()
    ctrl = diffrax.PIDController(rtol=1e-6, atol=1e-8)

    def solve(y0):
        return diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 3.0, 0.05, y0,
                           stepsize_controller=ctrl, saveat=diffrax.SaveAt(t0=True, t1=True))

    y0s = jnp.asarray(np.random.default_rng(0).standard_normal((3, 2, 4)))
    calls = []
    from clnode import _solve
    real = _solve.solve
    monkeypatch.setattr(_solve, "solve", lambda m, y, **k: calls.append(y.shape) or real(m, y, **k))
    before = clnode.jax.tape_stats()
    out = jax.jit(jax.vmap(jax.vmap(solve)))(y0s)
    after = clnode.jax.tape_stats()
    # nested vmaps: one clnode solve of the whole batch, the custom call's (no Python solve)
    assert calls == []
    assert (after["solves"] - before["solves"], after["trajectories"] - before["trajectories"]) \
        == (1, 6)
    assert out.ys.shape == (3, 2, 2, 4)
    ref = jax.vmap(jax.vmap(lambda y: diffrax.diffeqsolve(
        diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 3.0, 0.05, y, stepsize_controller=ctrl,
        saveat=diffrax.SaveAt(t0=True, t1=True))))(y0s)
    np.testing.assert_array_equal(np.asarray(out.stats["num_steps"]),
                                  np.asarray(ref.stats["num_steps"]))
    np.testing.assert_allclose(np.asarray(out.ys), np.asarray(ref.ys), rtol=1e-8, atol=1e-10)
    # the model as a jit argument (traced weights): checked inside the callback
    f = eqx.filter_jit(lambda fn, y: diffeqsolve(diffrax.ODETerm(fn), diffrax.Tsit5(), 0.0, 3.0,
                                                 0.05, y, stepsize_controller=ctrl))
    np.testing.assert_allclose(np.asarray(f(func, y0s[0, 0]).ys), np.asarray(out.ys[0, 0, 1:]),
                               rtol=1e-12)


def test_not_an_mlp_vector_field_is_refused():
    class Scaled(eqx.Module):  # a scale is solved (test_jax_forms.py), a term added is not
        mlp: eqx.nn.MLP

        def __call__(self, t, y, args):
            return self.mlp(y) + 1.0

    mlp = tanh_func().mlp
    with pytest.raises(ValueError, match="adds a term"):
        diffeqsolve(diffrax.ODETerm(Scaled(mlp)), diffrax.Tsit5(), 0.0, 1.0, 0.1,
                    jnp.zeros(4, jnp.float64))
    # under jit with traced weights: refused the same way, when the call is traced
    with pytest.raises(ValueError, match="adds a term"):
        eqx.filter_jit(lambda m, y: diffeqsolve(diffrax.ODETerm(Scaled(m)), diffrax.Tsit5(),
                                                0.0, 1.0, 0.1, y))(mlp, jnp.zeros(4))
    w = jnp.ones((4, 4))
    with pytest.raises(ValueError, match="closure"):
        diffeqsolve(diffrax.ODETerm(lambda t, y, args: jnp.tanh(w @ y)), diffrax.Tsit5(), 0.0,
                    1.0, 0.1, jnp.zeros(4, jnp.float64))


@pytest.mark.parametrize("kw, name", [
    (dict(adjoint=diffrax.BacksolveAdjoint()), "adjoint"),
    (dict(solver=diffrax.Kvaerno5()), "solver"),
    (dict(stepsize_controller=diffrax.StepTo(ts=jnp.linspace(0, 1, 5))), "stepsize_controller"),
    (dict(saveat=diffrax.SaveAt(t1=True, fn=lambda t, y, a: y[0])), "fn"),
    (dict(saveat=diffrax.SaveAt(dense=True)), "dense"),
    (dict(event=diffrax.Event(lambda t, y, args, **kw: False)), "event"),
])
def test_unsupported_arguments_are_named(kw, name):
    args = dict(solver=diffrax.Tsit5(), t0=0.0, t1=1.0, dt0=0.1, y0=jnp.zeros(4, jnp.float64))
    args.update(kw)
    solver = args.pop("solver")
    with pytest.raises(ValueError, match=name):
        diffeqsolve(diffrax.ODETerm(tanh_func()), solver, **args)


def test_time_gradient_and_second_order_raise_clear_errors():
    func = tanh_func()

    def loss(y0, t1=1.0):
        return diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, t1, 0.1, y0).ys.sum()

    y0 = jnp.zeros(4, jnp.float64)
    with pytest.raises(TypeError, match="no gradient with respect to t1"):
        jax.grad(loss, argnums=1)(y0, 1.0)
    with pytest.raises(TypeError, match="no gradient with respect to t1"):
        jax.jvp(lambda t1: loss(y0, t1), (1.0,), (1.0,))
    with pytest.raises(TypeError, match="second-order derivatives are not computed"):
        jax.hessian(loss)(y0)


def test_throw_and_max_steps():
    func = tanh_func()
    kw = dict(stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10), max_steps=3)
    sol = diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 3.0, 0.05,
                      jnp.ones(4, jnp.float64), throw=False, **kw)
    assert sol.result == diffrax.RESULTS.max_steps_reached and int(sol.stats["num_steps"]) == 3
    with pytest.raises(Exception, match="max_steps"):
        diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 3.0, 0.05,
                    jnp.ones(4, jnp.float64), **kw)


def test_from_equinox_nested_and_sequential():
    func = tanh_func()

    class Outer(eqx.Module):
        inner: dict
        scale: float = 1.0

    m = clnode.from_equinox(Outer({"a": [func]}))
    assert m.activation == "tanh" and m.sizes == (4, 16, 4)
    np.testing.assert_allclose(m(np.ones(4)), np.asarray(func.mlp(jnp.ones(4))), rtol=1e-12)
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    seq = eqx.nn.Sequential([eqx.nn.Linear(3, 5, key=k1), eqx.nn.Lambda(jax.nn.silu),
                             eqx.nn.Linear(5, 3, key=k2)])
    ms = clnode.from_equinox(seq)
    assert ms.activation == "silu" and ms.final_activation == "identity"
    np.testing.assert_allclose(ms(np.ones(3)), np.asarray(seq(jnp.ones(3))), rtol=1e-5)
    gelu = eqx.nn.MLP(3, 3, 4, 1, activation=jax.nn.gelu, key=k1)
    assert clnode.from_equinox(gelu).activation == "gelu"
    with pytest.raises(ValueError, match="more than one MLP"):
        clnode.from_equinox([func, func])
    with pytest.raises(ValueError, match="unsupported activation"):
        clnode.from_equinox(eqx.nn.MLP(3, 3, 4, 1, activation=jnp.sin, key=k1))
