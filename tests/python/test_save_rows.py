"""Each trajectory its own save times from Python: clnode.solve with SaveAt(ts=...) of shape (B, T)
equal bit for bit to solving each trajectory alone with its row as SaveAt(ts=row), the same
through Context.solve(save_ts=2-d); against the real diffrax.diffeqsolve under jax.vmap with
per-sample ts (the latent ODE decoder's form: t0 = ts[0], t1 = ts[-1], ConstantStepSize with
dt0 = 0.4, and a PIDController) in float64: exact step counts, values within 1e-10; and the
refusals, named after SaveAt(ts=...) or the library's message."""
import numpy as np
import pytest

import clnode
from clnode import _clnode

N, B, T = 3, 5, 6
RNG = np.random.default_rng(7)
W = [RNG.normal(0, 0.6, (16, N)), RNG.normal(0, 0.6, (N, 16))]
BIAS = [RNG.normal(0, 0.2, 16), RNG.normal(0, 0.2, N)]
Y0 = RNG.normal(0, 0.5, (B, N))
T0S = np.array([0.0, 0.5, -1.0, 0.3, 2.0])
T1S = np.array([6.0, 12.0, 4.0, 9.0, 2.0])  # the last: t0 == t1, no step
FRACS = np.array([[0.0, 0.1, 0.1, 0.5, 0.9, 1.0], [0.05, 0.2, 0.35, 0.6, 0.61, 0.8],
                  [0.3, 0.3, 0.3, 0.7, 1.0, 1.0], [0.01, 0.02, 0.4, 0.45, 0.97, 0.99],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])


def model():
    return clnode.MLP(W, BIAS, activation="tanh")


def rows(t0s, t1s):
    """Each trajectory's own times, spread over its own interval (its ends included)."""
    ts = t0s[:, None] + (t1s - t0s)[:, None] * FRACS
    ts[FRACS == 1.0] = np.broadcast_to(t1s[:, None], ts.shape)[FRACS == 1.0]
    return ts


def assert_same_row(batch, b, alone):
    """Trajectory b of the batch and the solve alone, bit for bit."""
    np.testing.assert_array_equal(batch.ts[b], alone.ts)
    np.testing.assert_array_equal(batch.ys[b], alone.ys)
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps", "num_rhs_evals"):
        assert batch.stats[key][b] == alone.stats[key], key
    assert batch.result[b] == alone.result and batch.t_final[b] == alone.t_final


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
@pytest.mark.parametrize("direction", [1, -1])
@pytest.mark.parametrize("constant", [False, True], ids=["adaptive", "constant"])
def test_rows_equal_each_trajectory_alone(precision, direction, constant):
    m = model()
    t0s, t1s = (T0S, T1S) if direction > 0 else (T1S, T0S)
    ts = rows(t0s, t1s)
    dt0s = direction * np.array([0.25, 0.5, 0.4, 0.3, 0.2])
    kw = dict(precision=precision, constant_step=constant, max_steps=64)
    if not constant:
        kw.update(rtol=1e-6 if precision == "fp64" else 1e-4, atol=1e-9 if precision == "fp64"
                  else 1e-6)
    for extra in (dict(), dict(t0=True, steps=True)):
        batch = clnode.solve(m, Y0, t0=t0s, t1=t1s, dt0=dt0s, saveat=clnode.SaveAt(ts=ts, **extra),
                             **kw)
        for b in range(B):
            alone = clnode.solve(m, Y0[b], t0=t0s[b], t1=t1s[b], dt0=dt0s[b],
                                 saveat=clnode.SaveAt(ts=ts[b], **extra), **kw)
            assert_same_row(batch, b, alone)
        if not extra:  # the row of Solution.ts is the trajectory's own times
            want = ts.astype(np.float32) if precision == "fp32" else ts
            np.testing.assert_array_equal(batch.ts, want)
    # the extension's own 2-d save_ts: the same solution
    ctx = clnode.Context("host")
    opts = dict(kw, t0=0.0, t1=0.0, save_t0=False, save_t1=False, save_steps=False)
    got = _clnode.Context.solve(ctx, m._m, Y0, opts, save_ts=ts, t0s=t0s, t1s=t1s, dt0s=dt0s)
    via = clnode.solve(m, Y0, t0=t0s, t1=t1s, dt0=dt0s, saveat=clnode.SaveAt(ts=ts), **kw)
    np.testing.assert_array_equal(got[0], via.ts)
    np.testing.assert_array_equal(got[1], via.ys)


def test_rows_refusals():
    m = model()
    ts = rows(T0S, T1S)
    kw = dict(y0=Y0, t0=T0S, t1=T1S, dt0=0.1)
    with pytest.raises(ValueError, match=r"SaveAt\(ts=\.\.\.\) of shape \(4, 6\) has 4 rows, but "
                                         r"the batch has 5 trajectories"):
        clnode.solve(m, saveat=clnode.SaveAt(ts=ts[:4]), **kw)
    with pytest.raises(ValueError, match=r"SaveAt\(ts=\.\.\.\) of shape \(1, 6\) gives each "
                                         r"trajectory its own times, but y0 of shape \(N,\)"):
        clnode.solve(m, Y0[0], t0=0.0, t1=6.0, saveat=clnode.SaveAt(ts=ts[:1]))
    with pytest.raises(ValueError, match=r"SaveAt\(ts=\.\.\.\) must be an array of shape \(T,\)"):
        clnode.SaveAt(ts=ts[None])
    bad = ts.copy()
    bad[3, 2] = bad[3, 1] - 0.01  # before its time 1, inside its interval
    with pytest.raises(clnode.InvalidArgumentError, match="monotone.*time 2 of trajectory 3"):
        clnode.solve(m, saveat=clnode.SaveAt(ts=bad), **kw)
    bad = ts.copy()
    bad[1, 0] = 0.25  # trajectory 1 starts at 0.5
    with pytest.raises(clnode.InvalidArgumentError,
                       match=r"save time 0 of trajectory 1 \(0.25\) lies outside its "
                             r"trajectory's interval \[t0, t1\] = \[0.5, 12\]"):
        clnode.solve(m, saveat=clnode.SaveAt(ts=bad), **kw)
    with pytest.raises(ValueError, match="finite"):
        bad[1, 0] = np.nan
        clnode.SaveAt(ts=bad)
    ctx = clnode.Context("host")
    with pytest.raises(clnode.InvalidArgumentError, match=r"save_ts of shape \(4, 6\).*5 rows"):
        _clnode.Context.solve(ctx, m._m, Y0, dict(t0=0.0, t1=1.0), save_ts=ts[:4], t0s=T0S,
                              t1s=T1S)


# ------------------------------------------------------------------------------------------------
# against diffrax under jax.vmap with per-sample ts (float64)

jax = pytest.importorskip("jax")
eqx = pytest.importorskip("equinox")
diffrax = pytest.importorskip("diffrax")
import jax.numpy as jnp  # noqa: E402


class Func(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.mlp(y)


def sample_times(whole_steps):
    """Each sample its own sorted, irregular times (the latent ODE's decoder input); with
    whole_steps, ts[-1] - ts[0] a whole number of steps of 0.4 (see below)."""
    rng = np.random.default_rng(3)
    gaps = rng.uniform(0.1, 1.6, (B, 8))
    gaps[:, 0] = rng.uniform(0.0, 1.0, B)  # its own start
    ts = np.cumsum(gaps, axis=1)
    if whole_steps:
        ts[:, 0] = np.round(ts[:, 0] * 4) / 4
        ts[:, -1] = ts[:, 0] + 0.4 * np.ceil((ts[:, -1] - ts[:, 0]) / 0.4)
    return ts


# diffrax 0.7.2's ConstantStepSize takes dt0 first, then ends its steps on the grid t0 + (t1 -
# t0) k / n, n = ceil((t1 - t0) / nextafter(dt0)), and so do clnode's constant steps: "constant"
# with t1 - t0 a whole number of dt0, "constant-partial" with any t1.
@pytest.mark.parametrize("controller", ["constant", "pid", "constant-partial"])
def test_rows_match_diffrax_under_vmap(controller):
    with jax.enable_x64(True):
        mlp = eqx.nn.MLP(N, N, 16, 2, activation=jnp.tanh, key=jax.random.PRNGKey(11),
                         dtype=jnp.float64)
        func = Func(mlp)
        ts = sample_times(whole_steps=controller == "constant")
        ctrl = (diffrax.ConstantStepSize() if controller.startswith("constant")
                else diffrax.PIDController(rtol=1e-8, atol=1e-10))

        def decode(y0, t):
            return diffrax.diffeqsolve(diffrax.ODETerm(func), diffrax.Tsit5(), t[0], t[-1], 0.4,
                                       y0, saveat=diffrax.SaveAt(ts=t), stepsize_controller=ctrl,
                                       max_steps=4096)
        ref = jax.jit(jax.vmap(decode))(jnp.asarray(Y0), jnp.asarray(ts))
        kw = dict(precision="fp64", max_steps=4096)
        if controller.startswith("constant"):
            kw.update(constant_step=True)
        else:
            kw.update(rtol=1e-8, atol=1e-10)
        got = clnode.solve(clnode.from_equinox(func), Y0, t0=ts[:, 0], t1=ts[:, -1], dt0=0.4,
                           saveat=clnode.SaveAt(ts=ts), **kw)
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
        np.testing.assert_array_equal(got.stats[key], np.asarray(ref.stats[key]), err_msg=key)
    assert got.ok
    assert int(np.min(got.stats["num_steps"])) > 2  # the steps, not only the first one
    np.testing.assert_array_equal(got.ts, np.asarray(ref.ts))
    np.testing.assert_allclose(got.ys, np.asarray(ref.ys), rtol=1e-10, atol=1e-10)
