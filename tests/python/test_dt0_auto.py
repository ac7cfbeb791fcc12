"""clnode.solve(dt0="auto"): each trajectory's first step chosen by the library (dt0_auto).
Oracles: the same solve with dt0_auto=True (the option it sets), the solve given the chosen first
steps as dt0 (read off a solve of one attempt where it was accepted: the same steps and bits, one
evaluation fewer for tsit5, whose first step reuses the selection's f0), dt0=None (0.01,
diffrax's), and the library's refusals."""
import numpy as np
import pytest

import clnode


def _model():
    rng = np.random.default_rng(3)
    ws = [rng.normal(size=(16, 4)) * 0.5, rng.normal(size=(4, 16)) * 0.5]
    bs = [rng.normal(size=16) * 0.1, rng.normal(size=4) * 0.1]
    return clnode.MLP(ws, bs, activation="tanh")


def _y0():
    return np.random.default_rng(4).normal(size=(5, 4))


def test_auto_is_the_option():
    m, y0 = _model(), _y0()
    a = clnode.solve(m, y0, t0=0.0, t1=2.0, dt0="auto", precision="fp64")
    b = clnode.solve(m, y0, t0=0.0, t1=2.0, dt0_auto=True, precision="fp64")
    n = clnode.solve(m, y0, t0=0.0, t1=2.0, precision="fp64")
    np.testing.assert_array_equal(a.ys, b.ys)
    np.testing.assert_array_equal(a.stats["num_rhs_evals"], b.stats["num_rhs_evals"])
    assert not np.array_equal(a.stats["num_rhs_evals"], n.stats["num_rhs_evals"])


@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_the_chosen_step_is_the_first_step(direction):
    m, y0 = _model(), _y0()
    kw = dict(t0=0.0, t1=direction * 2.0, precision="fp64", rtol=1e-6, atol=1e-9)
    one = clnode.solve(m, y0, dt0="auto", max_steps=1, **kw)  # saves where it stopped
    accepted = one.ts[:, 0] != 0.0  # t0 + dt0 (t0 = 0), else still at t0
    assert accepted.sum() >= 3
    first, y = one.ts[accepted, 0], y0[accepted]
    assert np.all(direction * first > 0) and np.all(np.abs(first) < 0.5)
    kw["saveat"] = clnode.SaveAt(steps=True)
    a = clnode.solve(m, y, dt0="auto", **kw)
    g = clnode.solve(m, y, dt0=first, **kw)
    np.testing.assert_array_equal(a.ys, g.ys)
    np.testing.assert_array_equal(a.stats["num_steps"], g.stats["num_steps"])
    np.testing.assert_array_equal(a.stats["num_rhs_evals"], g.stats["num_rhs_evals"] + 1)
    n = clnode.solve(m, y, dt0=None, **kw)
    assert not np.array_equal(n.ys, a.ys)


def test_refusals():
    m, y0 = _model(), _y0()
    with pytest.raises(ValueError, match="auto"):
        clnode.solve(m, y0, t0=0.0, t1=1.0, dt0="fast")
    with pytest.raises(ValueError, match="dt0_auto"):
        clnode.solve(m, y0, t0=0.0, t1=1.0, dt0="auto", constant_step=True)
    with pytest.raises(ValueError, match="dt0_auto"):
        clnode.solve(m, y0, t0=0.0, t1=1.0, dt0=0.1, dt0_auto=True)


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
def test_first_step_reports_the_given_step(precision):
    m, y0 = _model(), _y0()
    dt0 = np.array([0.01, 0.05, 0.1, 0.3, 0.7])
    want = dt0.astype(np.float32).astype(np.float64) if precision == "fp32" else dt0
    for t1, d, sign in ((2.0, dt0, 1.0), (-2.0, -dt0, -1.0)):  # signed as the direction
        s = clnode.solve(m, y0, t0=0.0, t1=t1, dt0=d, precision=precision)
        assert s.stats["first_step"].dtype == np.float64
        np.testing.assert_array_equal(s.stats["first_step"], sign * want)
    # after the dtmax clip, before the clip to the interval (t1 - t0 = 0.2 here)
    s = clnode.solve(m, y0, t0=0.0, t1=0.2, dt0=dt0, dtmax=0.25, precision="fp64")
    np.testing.assert_array_equal(s.stats["first_step"], np.minimum(dt0, 0.25))
    one = clnode.solve(m, y0[0], t0=0.0, t1=1.0, dt0=0.125, precision=precision)
    assert type(one.stats["first_step"]) is float and one.stats["first_step"] == 0.125
    none = clnode.solve(m, y0[0], t0=1.0, t1=1.0, dt0=0.125, precision=precision)
    assert none.stats["first_step"] == 0.0  # no step


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
@pytest.mark.parametrize("direction", [1.0, -1.0])
def test_first_step_reports_the_chosen_step(precision, direction):
    """Given back as dt0, the reported choice gives the same steps and bytes; it is the step a
    solve of one attempt took."""
    m = _model()
    y0 = _y0() * np.array([[1.0], [0.0], [10.0], [0.1], [1.0]])  # zero y0 too: h0 = 1e-6
    kw = dict(t0=0.0, t1=direction * 2.0, precision=precision, rtol=1e-5, atol=1e-7,
              saveat=clnode.SaveAt(steps=True))
    a = clnode.solve(m, y0, dt0="auto", **kw)
    first = a.stats["first_step"]
    # signed as the direction of integration: given back as dt0 it is the same solve
    assert np.all(direction * first > 0) and np.all(np.abs(first) < 2.0) and \
        len(set(first.tolist())) >= 4, first
    g = clnode.solve(m, y0, dt0=first, **kw)
    assert a.ys.tobytes() == g.ys.tobytes() and a.ts.tobytes() == g.ts.tobytes()
    np.testing.assert_array_equal(g.stats["first_step"], first)
    np.testing.assert_array_equal(a.stats["num_steps"], g.stats["num_steps"])
    np.testing.assert_array_equal(a.stats["num_rhs_evals"], g.stats["num_rhs_evals"] + 1)
    one = clnode.solve(m, y0, dt0="auto", max_steps=1, **dict(kw, saveat=clnode.SaveAt(t1=True)))
    took = one.ts[:, 0] != 0.0  # accepted: it stopped at t0 + dt0
    assert took.sum() >= 3
    np.testing.assert_array_equal(one.ts[took, 0].astype(np.float64), first[took])
