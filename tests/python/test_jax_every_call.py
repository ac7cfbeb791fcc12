"""Every diffeqsolve of a script replaced by clnode.jax's: diffrax's neural ODE example written
as a script at a reduced size (its own field for the data, a learnt scale times an MLP for the
model, optax's AdaBelief on batches, in float64). The data's solve (a field that is no network)
goes to diffrax with one FallbackWarning naming why; the model's solve is clnode's (solved by
the library, no warning); and the losses are the same bits as when only the model's call is
clnode's."""
import warnings

import numpy as np
import pytest

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
optax = pytest.importorskip("optax")
import jax.numpy as jnp  # noqa: E402
import jax.random as jr  # noqa: E402

import clnode  # noqa: E402
import clnode.jax  # noqa: E402

F64 = jnp.float64


def data(diffeqsolve, key, size=16, length=24):
    """Spirals of a cubic field, each from its own initial state (the example's _get_data)."""
    ts = jnp.linspace(0.0, 6.0, length, dtype=F64)
    y0s = jr.uniform(key, (size, 2), F64, minval=-0.6, maxval=1.0)

    def field(t, y, args):
        return jnp.stack([-0.1 * y[0] ** 3 + 2.0 * y[1] ** 3, -2.0 * y[0] ** 3 - 0.1 * y[1] ** 3])

    def one(y0):
        sol = diffeqsolve(diffrax.ODETerm(field), diffrax.Tsit5(), ts[0], ts[-1], 0.1, y0,
                          saveat=diffrax.SaveAt(ts=ts))
        return sol.ys

    return ts, jax.vmap(one)(y0s)


class Func(eqx.Module):
    out_scale: jax.Array
    mlp: eqx.nn.MLP

    def __init__(self, key):
        self.out_scale = jnp.array(1.0, F64)
        self.mlp = eqx.nn.MLP(2, 2, 16, 2, activation=jax.nn.softplus,
                              final_activation=jax.nn.tanh, key=key, dtype=F64)

    def __call__(self, t, y, args):
        return self.out_scale * self.mlp(y)


class NeuralODE(eqx.Module):
    func: Func

    def __call__(self, ts, y0, diffeqsolve):
        sol = diffeqsolve(diffrax.ODETerm(self.func), diffrax.Tsit5(), ts[0], ts[-1],
                          ts[1] - ts[0], y0,
                          stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
                          saveat=diffrax.SaveAt(ts=ts))
        return sol.ys


def train(data_solve, model_solve, steps=4, batch=8):
    """The example's training loop at a reduced size: the loss of every step."""
    key = jr.PRNGKey(5678)
    dkey, mkey, lkey = jr.split(key, 3)
    ts, ys = data(data_solve, dkey)
    model = NeuralODE(Func(mkey))
    opt = optax.adabelief(3e-3)
    state = opt.init(eqx.filter(model, eqx.is_inexact_array))

    @eqx.filter_value_and_grad
    def grad_loss(model, ti, yi):
        y_pred = jax.vmap(model, in_axes=(None, 0, None))(ti, yi[:, 0], model_solve)
        return jnp.mean((yi - y_pred) ** 2)

    @eqx.filter_jit
    def make_step(ti, yi, model, state):
        loss, grads = grad_loss(model, ti, yi)
        updates, state = opt.update(grads, state)
        return loss, eqx.apply_updates(model, updates), state

    losses = []
    n = ts.shape[0] // 2  # the example's first phase: the first part of the series
    for step in range(steps):
        idx = jr.permutation(jr.fold_in(lkey, step), ys.shape[0])[:batch]
        loss, model, state = make_step(ts[:n], ys[idx, :n], model, state)
        losses.append(np.asarray(loss))
    return np.array(losses)


def test_every_call_replaced(monkeypatch):
    monkeypatch.setenv("CLNODE_JAX_FALLBACK", "warn")
    # the jitted step's solves are clnode's custom calls: counted by the tape registry
    before = clnode.jax.tape_stats()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model_only = train(diffrax.diffeqsolve, clnode.jax.diffeqsolve)
    assert not [w for w in caught if issubclass(w.category, clnode.jax.FallbackWarning)]
    after = clnode.jax.tape_stats()
    assert after["solves"] > before["solves"], "the model's solve is not clnode's"
    before = after
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        every = train(clnode.jax.diffeqsolve, clnode.jax.diffeqsolve)
    fallbacks = [w for w in caught if issubclass(w.category, clnode.jax.FallbackWarning)]
    assert len(fallbacks) == 1, [str(w.message) for w in fallbacks]
    assert "no equinox.nn.MLP" in str(fallbacks[0].message)
    assert fallbacks[0].filename == __file__
    # the model's solves: clnode's, one batch of 8 per training step, its tape taken by the
    # reverse pass
    after = clnode.jax.tape_stats()
    steps = after["solves"] - before["solves"]
    assert steps == 4 and after["trajectories"] - before["trajectories"] == 8 * steps
    assert after["hits"] - before["hits"] == steps and after["misses"] == before["misses"]
    assert np.all(np.isfinite(every)) and np.all(every > 0)
    np.testing.assert_array_equal(every, model_only)
    # and with every call clnode's, the data are diffrax's bits
    ts, ys = data(diffrax.diffeqsolve, jr.split(jr.PRNGKey(5678), 3)[0])
    with pytest.warns(clnode.jax.FallbackWarning):
        ts2, ys2 = data(clnode.jax.diffeqsolve, jr.split(jr.PRNGKey(5678), 3)[0])
    np.testing.assert_array_equal(np.asarray(ys2), np.asarray(ys))
