"""The forms diffrax's own training examples solve, through clnode.jax.diffeqsolve against the
real diffrax (float64: exact step counts, values within 1e-10): the neural ODE example's
`out_scale * mlp(y)` with a trained scale, under jax.vmap over y0 with traced t0, t1, dt0 and
ts; the latent ODE example's decoder `scale * mlp(y)` with constant steps of 0.4 under jax.vmap
with every sample its own save times; and the refusals of other computations, by what they
compute (tests/python/test_jax_recognise.py has more)."""
import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402
from clnode.jax import diffeqsolve  # noqa: E402

F64 = jnp.float64


class ScaledFunc(eqx.Module):
    """The neural ODE example's vector field: a learnt scale times an MLP ending in tanh."""
    out_scale: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.out_scale * self.mlp(y)


def scaled_func(scale, n=2, width=64, depth=2, key=0, dtype=F64):
    mlp = eqx.nn.MLP(n, n, width, depth, activation=jax.nn.softplus,
                     final_activation=jax.nn.tanh, key=jax.random.PRNGKey(key), dtype=dtype)
    return ScaledFunc(jnp.asarray(scale, dtype), mlp)


class NeuralODE(eqx.Module):
    func: ScaledFunc

    def __call__(self, ts, y0, solve=diffeqsolve):
        sol = solve(diffrax.ODETerm(self.func), diffrax.Tsit5(), t0=ts[0], t1=ts[-1],
                    dt0=ts[1] - ts[0], y0=y0,
                    stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                    saveat=diffrax.SaveAt(ts=ts))
        return sol.ys, sol.stats["num_steps"]


def assert_close(got, ref, rtol=1e-10):
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    assert got.shape == ref.shape
    scale = max(float(np.max(np.abs(ref))), 1e-300)
    err = float(np.max(np.abs(got - ref))) / scale
    assert err <= rtol, f"largest difference {err:.3g} of the largest value"


@pytest.mark.parametrize("scale", [0.8, [0.8, -1.3]], ids=["scalar", "per-component"])
def test_neural_ode_example_trained_scale_matches_diffrax(scale):
    """The example's model at a trained scale under filter_jit(vmap(model, in_axes=(None, 0))),
    ts traced: the same step counts as diffrax and values within 1e-10."""
    model = NeuralODE(scaled_func(scale))
    ts = jnp.linspace(0.0, 10.0, 100, dtype=F64)
    y0 = jax.random.uniform(jax.random.PRNGKey(1), (8, 2), F64, -0.6, 1.0)

    def run(m, ts, y0, solve):
        return jax.vmap(lambda y: m(ts, y, solve=solve))(y0)

    got_ys, got_n = eqx.filter_jit(run)(model, ts, y0, diffeqsolve)
    ref_ys, ref_n = eqx.filter_jit(run)(model, ts, y0, diffrax.diffeqsolve)
    np.testing.assert_array_equal(np.asarray(got_n), np.asarray(ref_n))
    assert int(np.min(got_n)) >= 3
    assert_close(got_ys, ref_ys)


def test_scale_one_is_the_network_bit_for_bit():
    """A scale of exactly 1 solves the network itself: the same bits as mlp(y)."""
    f = scaled_func(1.0, n=3, width=16)
    kw = dict(t0=0.0, t1=4.0, dt0=0.1, y0=jnp.array([0.3, -0.2, 0.5], F64),
              stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
              saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 4.0, 9, dtype=F64)))
    a = diffeqsolve(diffrax.ODETerm(f), diffrax.Tsit5(), **kw)
    b = diffeqsolve(diffrax.ODETerm(lambda t, y, args: f.mlp(y)), diffrax.Tsit5(), **kw)
    np.testing.assert_array_equal(np.asarray(a.ys), np.asarray(b.ys))
    c = diffeqsolve(diffrax.ODETerm(scaled_func(0.5, n=3, width=16)), diffrax.Tsit5(), **kw)
    assert not np.array_equal(np.asarray(a.ys), np.asarray(c.ys))


class ExpScale(eqx.Module):
    log_scale: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return jnp.exp(self.log_scale) * self.mlp(jnp.concatenate([y, t[None]]))


class ArgsScale(eqx.Module):
    scale: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.mlp(jnp.concatenate([y, args])) * self.scale


def test_scale_forms_with_time_and_args_match_diffrax():
    """s an expression of leaves (exp(log_scale)) with [y, t] input; s on the right of a [y,
    args] network, under vmap over y0 and args; a lambda reading a global-free closure."""
    k = jax.random.PRNGKey(4)
    f1 = ExpScale(jnp.asarray(-0.4, F64), eqx.nn.MLP(3, 2, 16, 2, activation=jnp.tanh, key=k,
                                                      dtype=F64))
    f2 = ArgsScale(jnp.asarray([0.7, 1.2], F64),
                   eqx.nn.MLP(4, 2, 16, 2, activation=jnp.tanh, key=k, dtype=F64))
    mlp3 = f1.mlp
    s3 = jnp.asarray(1.7, F64)

    def f3(t, y, args):
        return s3 * mlp3(jnp.concatenate([y, t[None]]))

    ctrl = diffrax.PIDController(rtol=1e-7, atol=1e-9)
    ts = jnp.linspace(0.0, 3.0, 7, dtype=F64)
    y0 = jnp.asarray([[0.2, -0.4], [1.0, 0.1], [-0.5, 0.9]], F64)
    args = jnp.asarray([[0.0, 1.0], [0.5, -0.5], [-1.0, 0.25]], F64)
    for func, a in ((f1, None), (f2, args), (f3, None)):
        def one(y, c, solve, func=func):
            sol = solve(diffrax.ODETerm(func), diffrax.Dopri5(), 0.0, 3.0, 0.05, y, args=c,
                        stepsize_controller=ctrl, saveat=diffrax.SaveAt(ts=ts))
            return sol.ys, sol.stats["num_steps"]
        axes = (0, 0) if a is not None else (0, None)
        got = jax.jit(jax.vmap(lambda y, c: one(y, c, diffeqsolve), in_axes=axes))(y0, a)
        ref = jax.jit(jax.vmap(lambda y, c: one(y, c, diffrax.diffeqsolve), in_axes=axes))(y0, a)
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(ref[1]))
        assert_close(got[0], ref[0])


class Shifted(eqx.Module):
    a: jax.Array
    b: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.a * self.mlp(y) + self.b


def test_added_term_refused_at_every_value():
    """a * mlp(y) + b is refused by what it computes, with b == 0 as with b moved, eagerly and
    under the same jitted function (its values were once checked instead, and b == 0 passed
    with the wrong gradient for b)."""
    mlp = eqx.nn.MLP(2, 2, 16, 2, activation=jax.nn.softplus, final_activation=jax.nn.tanh,
                     key=jax.random.PRNGKey(2), dtype=F64)
    f = Shifted(jnp.asarray(0.9, F64), jnp.zeros(2, F64), mlp)

    @eqx.filter_jit
    def run(func, y0):
        return diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 1.0, 0.1, y0,
                           stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-8)).ys

    y0 = jnp.asarray([0.1, 0.2], F64)
    moved = eqx.tree_at(lambda m: m.b, f, jnp.asarray([0.01, 0.0], F64))
    for func in (f, moved):
        with pytest.raises(clnode.jax.UnsupportedArgument, match=r"adds a term .*\.b"):
            run(func, y0)
        with pytest.raises(clnode.jax.UnsupportedArgument, match="adds a term"):
            diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), 0.0, 1.0, 0.1, y0)


@pytest.mark.parametrize("field, match", [
    (lambda m: lambda t, y, args: y[0] * m(y), r"factor that depends on .*a part of y"),
    (lambda m: lambda t, y, args: m(y) + y, r"adds a term .*add\(the network's output, y\)"),
    (lambda m: lambda t, y, args: (1.0 + t) * m(y), "factor that depends on t, y or args"),
    (lambda m: lambda t, y, args: jnp.tanh(m(y)), r"tanh\(the network's output\)"),
    (lambda m: lambda t, y, args: m(y) / 0.0, "divides its network's output"),
    (lambda m: lambda t, y, args: jnp.inf * m(y), "not finite"),
], ids=["y-times", "plus-y", "t-times", "tanh-after", "divided", "infinite"])
def test_other_scalings_refused(field, match):
    mlp = eqx.nn.MLP(2, 2, 8, 1, activation=jnp.tanh, key=jax.random.PRNGKey(6), dtype=F64)
    with pytest.raises(clnode.jax.UnsupportedArgument, match=match):
        diffeqsolve(diffrax.ODETerm(field(mlp)), diffrax.Tsit5(), 0.0, 1.0, 0.1,
                    jnp.asarray([0.1, 0.2], F64))


# ------------------------------------------------------------------------------------------------
# the latent ODE example's decoder: per-sample save times under jax.vmap, constant steps


class LatentFunc(eqx.Module):
    scale: jax.Array
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.scale * self.mlp(y)


def latent_func(dtype=F64):
    mlp = eqx.nn.MLP(8, 8, 16, 2, activation=jax.nn.softplus, final_activation=jax.nn.tanh,
                     key=jax.random.PRNGKey(11), dtype=dtype)
    return LatentFunc(jnp.asarray(0.75, dtype), mlp)


def sample_times(b=6, t=12, dtype=F64):
    """Irregular sorted times per sample, each its own start and end (as the example's
    dataset samples them)."""
    rng = np.random.default_rng(3)
    ts = np.sort(rng.uniform(0.0, 10.0, (b, t)), axis=1)
    ts[:, 0] = rng.uniform(0.0, 1.0, b)
    return jnp.asarray(ts, dtype)


def decode(func, ts, y0, solve):
    sol = solve(diffrax.ODETerm(func), diffrax.Tsit5(), ts[0], ts[-1], 0.4, y0,
                saveat=diffrax.SaveAt(ts=ts))
    return sol.ys, sol.stats["num_steps"]


def test_latent_ode_decoder_per_sample_ts_matches_diffrax():
    """The decoder under filter_jit(vmap) over (ts, y0), every sample its own save times:
    diffrax's step counts and values within 1e-10; each sample alone gives the same bits."""
    func = latent_func()
    ts = sample_times()
    y0 = jax.random.normal(jax.random.PRNGKey(5), (ts.shape[0], 8), F64)

    def run(f, ts, y0, solve):
        return jax.vmap(lambda t, y: decode(f, t, y, solve))(ts, y0)

    got, n = eqx.filter_jit(run)(func, ts, y0, diffeqsolve)
    ref, nref = eqx.filter_jit(run)(func, ts, y0, diffrax.diffeqsolve)
    np.testing.assert_array_equal(np.asarray(n), np.asarray(nref))
    assert_close(got, ref)
    for b in (0, 3):
        alone, _ = decode(func, ts[b], y0[b], diffeqsolve)
        np.testing.assert_array_equal(np.asarray(alone), np.asarray(got[b]))


def test_latent_ode_decoder_fp32():
    """The example's own precision: float32, within float32's reach of diffrax, the same
    (constant) step counts."""
    func = latent_func(jnp.float32)
    ts = sample_times(dtype=jnp.float32)
    y0 = jax.random.normal(jax.random.PRNGKey(5), (ts.shape[0], 8), jnp.float32)
    run = jax.jit(jax.vmap(lambda t, y: decode(func, t, y, diffeqsolve)))
    got, n = run(ts, y0)
    ref, nref = jax.jit(jax.vmap(lambda t, y: decode(func, t, y, diffrax.diffeqsolve)))(ts, y0)
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(n), np.asarray(nref))
    assert_close(got, ref, rtol=1e-4)


def test_bad_sample_times_raise_the_message():
    """A sample whose times run backwards: the message names it, eagerly under vmap and under
    filter_jit (equinox's error with the message), never an internal callback error alone."""
    func = latent_func()
    ts = np.array(sample_times())
    ts[2, 5], ts[2, 6] = ts[2, 6], ts[2, 5]
    ts = jnp.asarray(ts)
    y0 = jnp.zeros((ts.shape[0], 8), F64)
    with pytest.raises(ValueError, match=r"trajectory 2.*not monotone"):
        jax.vmap(lambda t, y: decode(func, t, y, diffeqsolve))(ts, y0)
    run = eqx.filter_jit(jax.vmap(lambda t, y: decode(func, t, y, diffeqsolve)))
    with pytest.raises(eqx.EquinoxRuntimeError, match="not monotone"):
        jax.block_until_ready(run(ts, y0))
