"""The step size controller's numbers (rtol, atol, its coefficients) as operands of clnode's
custom calls: a jitted function of a traced rtol runs each new tolerance through the program it
compiled once, with the bits of the eager solve at that tolerance, forward and gradient; the
callback path (a progress meter) takes them too; a value the library refuses is its error,
and vmap over a tolerance is refused by name."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402
from test_jax_ffi import enable_x64  # noqa: E402  (jax.enable_x64 where jax has it)


TS = np.linspace(0.2, 2.0, 7)  # concrete: the same save times under jit and eagerly


def field(n=3, width=16):
    mlp = eqx.nn.MLP(n, n, width, 2, activation=jnp.tanh, key=jax.random.PRNGKey(4),
                     dtype=jnp.float64)
    return jax.tree_util.tree_map(lambda x: 2.0 * x if eqx.is_array(x) else x, mlp)


def solve(mlp, y0, rtol, pcoeff=0.0, **kw):
    return diffeqsolve(diffrax.ODETerm(lambda t, y, a: mlp(y)), diffrax.Tsit5(), 0.0, 2.0, 0.05,
                       y0, None, stepsize_controller=diffrax.PIDController(
                           rtol=rtol, atol=1e-9, pcoeff=pcoeff, icoeff=1.0),
                       saveat=diffrax.SaveAt(ts=TS), **kw)


def data():
    rng = np.random.default_rng(5)
    return jnp.asarray(rng.standard_normal((4, 3))), jnp.asarray(rng.standard_normal((4, 7, 3)))


def test_a_traced_rtol_compiles_once_and_gives_the_eager_bits():
    with enable_x64(True):
        mlp = field()
        y0s, _ = data()
        f = jax.jit(lambda y, r: jax.vmap(lambda yi: solve(mlp, yi, r).ys)(y))
        steps = set()
        for rtol in (1e-4, 1e-7, 1e-4):
            before = clnode.jax.tape_stats()["solves"]
            got = f(y0s, jnp.asarray(rtol))
            assert clnode.jax.tape_stats()["solves"] == before + 1  # the custom call
            want = jax.vmap(lambda yi: solve(mlp, yi, rtol).ys)(y0s)  # eager, a Python float
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
            steps.add(int(solve(mlp, y0s[0], rtol).stats["num_steps"]))
        assert len(steps) == 2  # the tolerance did change the solve
        assert f._cache_size() == 1  # one compilation for every tolerance


def test_a_traced_rtol_and_coefficient_in_a_jitted_gradient():
    with enable_x64(True):
        mlp = field()
        y0s, w = data()
        params, static = eqx.partition(mlp, eqx.is_inexact_array)

        def loss(p, r, pc):
            m = eqx.combine(p, static)
            return jnp.sum(w * jax.vmap(lambda yi: solve(m, yi, r, pcoeff=pc).ys)(y0s))

        g = jax.jit(jax.grad(loss))
        for rtol, pc in ((1e-5, 0.0), (1e-8, 0.2)):
            got = g(params, jnp.asarray(rtol), jnp.asarray(pc))
            want = jax.grad(loss)(params, rtol, pc)  # eager, Python floats
            for a, b in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want),
                            strict=True):
                np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
        assert g._cache_size() == 1
        with pytest.raises(TypeError, match="rtol, atol and coefficients"):
            jax.grad(loss, argnums=1)(params, jnp.asarray(1e-5), 0.0)


def test_the_callback_path_takes_a_traced_rtol():
    """A progress meter keeps the callback under jit: it reads the operand too."""
    with enable_x64(True):
        mlp = field()
        y0s, _ = data()
        meter = diffrax.TextProgressMeter(minimum_increase=10.0)
        f = jax.jit(lambda y, r: solve(mlp, y, r, progress_meter=meter).ys)
        for rtol in (1e-4, 1e-7):
            np.testing.assert_array_equal(np.asarray(f(y0s[1], jnp.asarray(rtol))),
                                          np.asarray(solve(mlp, y0s[1], rtol).ys))


def test_a_refused_tolerance_and_vmap_over_one_are_errors_by_name():
    with enable_x64(True):
        mlp = field()
        y0s, _ = data()
        f = jax.jit(lambda y, r: solve(mlp, y, r).ys)
        with pytest.raises(Exception, match="rtol"):
            jax.block_until_ready(f(y0s[0], jnp.asarray(-1.0)))
        g = jax.jit(jax.vmap(lambda y, r: solve(mlp, y, r).ys))
        with pytest.raises(Exception, match="controller's rtol changes from trajectory"):
            jax.block_until_ready(g(y0s[:2], jnp.asarray([1e-4, 1e-6])))
        np.testing.assert_array_equal(  # the same rtol for every trajectory is one solve
            np.asarray(g(y0s[:2], jnp.asarray([1e-6, 1e-6]))),
            np.asarray(jax.vmap(lambda y: solve(mlp, y, 1e-6).ys)(y0s[:2])))
