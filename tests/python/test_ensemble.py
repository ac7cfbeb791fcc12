"""Per-trajectory problems from Python: clnode.solve with t0/t1/dt0 arrays and conditioning inputs
(args), equal bit for bit to solving each trajectory alone and to diffrax's reference data
(tests/data/diffrax/ensemble-fp64.json); and the refusals of bad input."""
import json
import pathlib

import numpy as np
import pytest

import clnode

REPO = pathlib.Path(__file__).resolve().parents[2]

MODEL = "tests/data/models/cond4x2.safetensors"  # 4 states, 2 conditioning inputs, tanh
T0S = np.array([0.0, 0.5, -1.0, 0.3, 0.1])
T1S = np.array([6.0, 12.0, 4.0, 9.0, 20.0])
DT0S = np.array([0.02, 0.05, 0.01, 0.1, 0.03])
ARGS = np.array([[0.0, 0.0], [1.0, -0.5], [-2.0, 0.75], [0.3, 1.7], [-0.9, -1.1]])
Y0 = np.array([[0.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.25, 1.0], [-1.0, 0.3, 0.7, -0.2],
               [0.1, 0.2, 0.3, 0.4], [2.0, -1.0, 0.0, 0.5]])


@pytest.fixture(scope="module")
def model():
    return clnode.MLP.load(REPO / MODEL)


def assert_same_solution(a, b):
    """Bit for bit: times, states, stats, results."""
    np.testing.assert_array_equal(a.ts, b.ts)
    np.testing.assert_array_equal(a.ys, b.ys)
    assert a.ts.dtype == b.ts.dtype and a.ys.dtype == b.ys.dtype
    for key in ("num_steps", "num_accepted_steps", "num_rejected_steps", "num_rhs_evals"):
        np.testing.assert_array_equal(a.stats[key], b.stats[key])
    np.testing.assert_array_equal(a.result, b.result)
    np.testing.assert_array_equal(a.t_final, b.t_final)


def test_model_with_inputs_loaded_and_built(model):
    assert model.num_inputs == 2 and model.sizes == (6, 32, 32, 4) and not model.time_input
    assert "inputs=2" in repr(model)
    again = clnode.MLP.from_bytes(model.to_bytes())
    assert again == model and again.num_inputs == 2
    with pytest.raises(ValueError, match="0 conditioning inputs"):  # 6 -> 4 needs 2 inputs
        clnode.MLP(model.weights, model.biases, activation="tanh")
    built = clnode.MLP(model.weights, model.biases, activation="tanh", inputs=2)
    assert built == model
    # the vector field with its inputs: MLP([y, c]) by numpy, against the layers by hand
    y, c = Y0[1], ARGS[1]
    h = np.concatenate([y, c])
    for i, (w, b) in enumerate(model.layers):
        h = w @ h + b
        h = np.tanh(h) if i < model.num_layers - 1 else h
    np.testing.assert_allclose(model(y, args=c), h, rtol=1e-14, atol=1e-15)
    with pytest.raises(ValueError, match="conditioning inputs"):
        model(y)
    with pytest.raises(ValueError, match="inputs must be a non-negative integer"):
        clnode.MLP(model.weights, model.biases, inputs=-1)
    with pytest.raises(ValueError):  # 6 inputs cannot be 4 states + 3 inputs
        clnode.MLP(model.weights, model.biases, inputs=3)


@pytest.mark.parametrize("precision", ["fp64", "fp32"])
@pytest.mark.parametrize("direction", [1, -1])
def test_arrays_equal_each_trajectory_alone(model, precision, direction):
    t0s, t1s, dt0s = (T0S, T1S, DT0S) if direction > 0 else (T1S, T0S, -DT0S)
    ts = np.array([-0.5, 0.0, 0.4, 2.5, 5.0, 8.0, 11.0, 15.0])[::direction]
    for saveat in (clnode.SaveAt(t1=True), clnode.SaveAt(t0=True, ts=ts),
                   clnode.SaveAt(steps=True), clnode.SaveAt(ts=ts, t1=True)):
        kw = dict(method="dopri5", rtol=1e-6, atol=1e-9, precision=precision, saveat=saveat,
                  max_steps=256)
        batch = clnode.solve(model, Y0, t0=t0s, t1=t1s, dt0=dt0s, args=ARGS, **kw)
        assert batch.ys.shape[0] == 5 and batch.ok
        for b in range(5):
            lo, hi = sorted((t0s[b], t1s[b]))
            mine = ts[(ts >= lo) & (ts <= hi)]
            sa = clnode.SaveAt(t0=saveat.t0, t1=saveat.t1, steps=saveat.steps,
                               ts=mine if saveat.ts is not None else None)
            alone = clnode.solve(model, Y0[b], t0=t0s[b], t1=t1s[b], dt0=dt0s[b], args=ARGS[b],
                                 **dict(kw, saveat=sa))
            # the batch's row is compact: the saved points, then +inf up to the batch's width
            k = alone.ts.shape[0]
            np.testing.assert_array_equal(batch.ts[b, :k], alone.ts)
            np.testing.assert_array_equal(batch.ys[b, :k], alone.ys)
            assert np.all(np.isinf(batch.ts[b, k:]))
            for key in ("num_steps", "num_accepted_steps", "num_rejected_steps"):
                assert batch.stats[key][b] == alone.stats[key]
            # t1 as the solve's precision holds it
            t1 = float(np.float32(t1s[b])) if precision == "fp32" else t1s[b]
            assert batch.t_final[b] == alone.t_final == t1
    # the inputs matter, and (k,) args are shared by the batch
    shared = clnode.solve(model, Y0, t0=t0s, t1=t1s, dt0=dt0s, args=ARGS[2], precision=precision)
    each = clnode.solve(model, Y0, t0=t0s, t1=t1s, dt0=dt0s, args=np.tile(ARGS[2], (5, 1)),
                        precision=precision)
    np.testing.assert_array_equal(shared.ys, each.ys)
    other = clnode.solve(model, Y0, t0=t0s, t1=t1s, dt0=dt0s, args=ARGS, precision=precision)
    assert not np.array_equal(shared.ys[0], other.ys[0])


def test_scalars_and_arrays_mix(model):
    """A scalar t0 with an array t1, a default dt0 (None) with arrays: each as alone."""
    batch = clnode.solve(model, Y0, t0=0.25, t1=T1S, args=ARGS, precision="fp64", rtol=1e-5)
    for b in range(5):
        alone = clnode.solve(model, Y0[b], t0=0.25, t1=T1S[b], args=ARGS[b], precision="fp64",
                             rtol=1e-5)
        np.testing.assert_array_equal(batch.ys[b], alone.ys)
        assert batch.stats["num_steps"][b] == alone.stats["num_steps"]
    # float32 and integer arrays convert exactly
    a = clnode.solve(model, Y0, t0=np.zeros(5, np.int32), t1=T1S.astype(np.float32),
                     args=ARGS.astype(np.float32), precision="fp64")
    b = clnode.solve(model, Y0, t0=0.0, t1=T1S.astype(np.float32).astype(np.float64),
                     args=ARGS.astype(np.float32).astype(np.float64), precision="fp64")
    assert_same_solution(a, b)


def test_against_diffrax_reference_fp64(model, repo):
    """The committed diffrax data (scripts/make_reference.py --only-ensemble): exact steps, final
    states within the diffrax parity bound (1e-9)."""
    data = json.loads((repo / "tests/data/diffrax/ensemble-fp64.json").read_text())
    seen = 0
    for case in data["cases"]:
        # dopri8's steps on these problems move with the rounding of the sums in diffrax itself:
        # tests/backend/test_ensemble_diffrax.c holds it to diffrax's own spread
        if case["save"] not in ("t1", "steps") or case["method"] == "dopri8":
            continue
        saveat = clnode.SaveAt(t1=True) if case["save"] == "t1" else clnode.SaveAt(steps=True)
        sol = clnode.solve(model, np.array(case["y0"]), t0=np.array(case["t0s"]),
                           t1=np.array(case["t1s"]), dt0=np.array(case["dt0s"]),
                           args=np.array(case["args"]), method=case["method"],
                           rtol=case["rtol"], atol=case["atol"], max_steps=case["max_steps"],
                           precision="fp64", precision_guard="off", saveat=saveat)
        for b, tr in enumerate(case["trajectories"]):
            assert sol.stats["num_steps"][b] == tr["num_steps"]
            assert sol.stats["num_accepted_steps"][b] == tr["num_accepted"]
            assert sol.stats["num_rejected_steps"][b] == tr["num_rejected"]
            n = len(tr["ts"])
            np.testing.assert_allclose(sol.ys[b, n - 1], tr["ys"][-1], rtol=1e-9, atol=1e-9)
            seen += 1
    assert seen >= 50


# ------------------------------------------------------------------------------------------------
# refusals


@pytest.mark.parametrize("kw, err, match", [
    (dict(t1=np.ones(4)), ValueError, r"t1 must be a scalar or an array of shape \(5,\)"),
    (dict(t0=np.zeros((5, 1))), ValueError, r"t0 must be a scalar or an array of shape \(5,\)"),
    (dict(dt0=np.full(6, 0.1)), ValueError, "dt0 must be"),
    (dict(args=np.zeros((5, 3))), ValueError, r"args must have shape \(5, 2\) or \(2,\)"),
    (dict(args=np.zeros((4, 2))), ValueError, "args must have shape"),
    (dict(args=None), ValueError, "takes 2 conditioning inputs"),
    (dict(t1=T1S.astype(np.complex128)), TypeError, "real numbers"),
    (dict(t1=T1S.astype(np.longdouble)), TypeError, "would round"),
    (dict(t1=np.array([2 ** 60] * 5)), TypeError, "beyond 2"),
    (dict(t1=np.array(["1"] * 5)), TypeError, "real numbers"),
    (dict(t1=np.array([True] * 5)), TypeError, "real numbers"),
    (dict(args=ARGS.astype(object)), TypeError, "real numbers"),
    (dict(t1=np.array([1.0, np.nan, 1.0, 1.0, 1.0])), ValueError, "t1 must be finite"),
    (dict(dt0=np.array([0.1, 0.1, np.inf, 0.1, 0.1])), ValueError, "dt0 must be finite"),
    (dict(args=np.where(ARGS == 1.0, np.nan, ARGS)), ValueError, "args must be finite"),
    (dict(t1=np.array([1.0, 1.0, -1.0, 1.0, 1.0])), ValueError, "direction of integration"),
    (dict(dt0=np.array([0.1, 0.1, -0.1, 0.1, 0.1])), ValueError, "wrong sign"),
])
def test_bad_per_trajectory_input_refused(model, kw, err, match):
    base = dict(t0=0.0, t1=1.0, args=ARGS)
    base.update(kw)
    with pytest.raises(err, match=match):
        clnode.solve(model, Y0, **base)


def test_inputs_refused_where_they_do_not_fit(model):
    with pytest.raises(ValueError, match="no conditioning inputs"):
        clnode.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=1, args=np.zeros(2))
    with pytest.raises(ValueError, match=r"need y0 of shape \(B, N\)"):
        clnode.solve(model, Y0[0], t0=0.0, t1=T1S, args=ARGS[0])
    with pytest.raises(ValueError, match=r"args must have shape \(2,\)"):
        clnode.solve(model, Y0[0], t0=0.0, t1=1.0, args=ARGS)
