"""A property-based fuzzer for the Python API (hypothesis, derandomized: the same examples on
every run, bounded by max_examples): clnode.solve's keywords, its arrays and clnode.MLP, each
spelled in many ways (bool, numpy.bool_, int, numpy integers, float, numpy.float32, strings,
None, lists, tuples, 0-d and 1-element arrays, arrays of other dtypes, Fortran order,
non-contiguous slices, byte-swapped, extra dimensions).

The property, for every generated call: either a clean exception (clnode.Error, TypeError or
ValueError) whose message names one of the arguments spelled differently, or a result
bit-identical (ts, ys, stats, result, t_final, certificate) to the same solve with canonical
arguments (float64 C-contiguous arrays, real bools, Python ints and floats, the value each
spelling says: "False" says False, numpy.float32(0.1) says the float32 nearest 0.1). A spelling
that says no valid value (2.9 steps, a bool for a number, an array where a scalar goes, an extra
axis on an array) must be refused. Anything else, another exception or a different answer,
fails: coercions are exactly the spellings that change the answer."""
import re
import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import clnode  # noqa: E402

SETTINGS = dict(derandomize=True, deadline=None, database=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
MUST_RAISE = object()  # the meaning of a spelling that says no valid value

RNG = np.random.default_rng(11)
N, H, K, B = 3, 4, 2, 2
LAYERS = [(0.6 * RNG.standard_normal((H, N + 1 + K)), 0.1 * RNG.standard_normal(H)),
          (0.6 * RNG.standard_normal((N, H)), 0.1 * RNG.standard_normal(N))]
PLAIN = clnode.MLP([0.6 * RNG.standard_normal((H, N)), 0.6 * RNG.standard_normal((N, H))],
                   [0.1 * RNG.standard_normal(H), None], activation="tanh")
COND = clnode.MLP([w for w, _ in LAYERS], [b for _, b in LAYERS], activation="softplus",
                  time_input=True, inputs=K)
Y0 = np.array([0.4, -0.3, 0.2])
Y0B = np.array([[0.4, -0.3, 0.2], [-0.1, 0.25, 0.5]])
ARGS = np.array([0.3, -0.7])
ARGSB = np.array([[0.3, -0.7], [1.0, 0.5]])
ALLOWED = (clnode.Error, TypeError, ValueError)


# ------------------------------------------------------------------------------------------------
# spellings: (value, what it says) with MUST_RAISE for a spelling that says no valid value


def bool_spellings(b):
    return [(b, b), (np.bool_(b), b), (str(b), b), (str(b).lower(), b), ("yes" if b else "no", b),
            (int(b), b), (float(b), b), (np.int64(b), b), (None if not b else "1", b),
            (np.array(b), b), (np.array([b]), MUST_RAISE), ([b], MUST_RAISE)]


def int_spellings(m):
    return [(m, m), (np.int64(m), m), (np.int32(m), m), (np.uint16(m), m), (float(m), m),
            (np.float64(m), m), (m + 0.5, MUST_RAISE), (str(m), m), (True, MUST_RAISE),
            (np.array([m]), MUST_RAISE), (np.array(m), m), (None, MUST_RAISE)]


def float_spellings(x, optional=False):
    f32 = float(np.float32(x))
    out = [(x, x), (np.float64(x), x), (np.array(x), x), (np.float32(x), f32),
           (np.array(x, np.float32), f32), (str(x), x), (repr(x).encode(), x), ([x], MUST_RAISE),
           (np.array([x]), MUST_RAISE), (np.array([[x]]), MUST_RAISE), ((x,), MUST_RAISE),
           (True, MUST_RAISE), (complex(x), MUST_RAISE), (np.longdouble(x), x),
           (None, None if optional else MUST_RAISE)]
    if float(x).is_integer():
        out += [(int(x), x), (np.int64(int(x)), x)]
    return out


def choice_spellings(s, choices, none_says=MUST_RAISE):
    return [(s, s), (np.str_(s), s), (s.upper(), s.upper() if s.upper() in choices else s),
            (s.encode(), s), (None, none_says), ([s], MUST_RAISE), ("", MUST_RAISE)]


def array_spellings(a, exact_int=False, extra_axis=True):
    """Spellings of a float64 array a; extra_axis: whether a[None] says nothing (for y0 (N,) it
    is another valid problem, a batch of one)."""
    out = [(a, a), (np.asfortranarray(a), a), (a.tolist(), a), (a.astype(">f8"), a),
           (np.ascontiguousarray(a[..., ::-1])[..., ::-1], a),  # a negative-stride view
           (a.astype(np.float32), a.astype(np.float32).astype(np.float64)),
           (a.astype(str), MUST_RAISE), (a.astype(object), a), (a.astype(complex), MUST_RAISE),
           (a.astype(bool), MUST_RAISE)]
    if extra_axis:
        out.append((a[None], MUST_RAISE))
    big = np.zeros(a.shape + (2,))
    big[..., 0] = a
    out.append((big[..., 0], a))  # non-contiguous
    if a.ndim >= 1:
        out.append((tuple(a.tolist()), a))
    if exact_int:
        out.append((a.astype(np.int64), a))
    return out


# ------------------------------------------------------------------------------------------------
# the property


def note(what):
    if hypothesis.currently_in_test_context():
        event(what)


def result_of(fn):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", clnode.PrecisionWarning)
        return fn()


def fingerprint(sol):
    cert = None
    if sol.certificate is not None:
        cert = {k: v for k, v in sol.certificate.items() if k != "seconds"}
    stats = {k: (np.asarray(v).dtype.str, np.asarray(v).tobytes()) for k, v in sol.stats.items()}
    return (sol.ts.dtype.str, sol.ts.shape, sol.ts.tobytes(), sol.ys.dtype.str, sol.ys.shape,
            sol.ys.tobytes(), stats, np.asarray(sol.result).tolist(),
            np.asarray(sol.t_final).tobytes(), repr(cert))


_CANONICAL = {}


def canonical(key, fn):
    if key not in _CANONICAL:
        _CANONICAL[key] = fingerprint(result_of(fn))
    return _CANONICAL[key]


def check(spelled, names, says, key, call_spelled, call_canonical):
    """The property: a clean exception naming one of `names`, or the canonical result. (A
    canonical call the library refuses, such as constant steps with dt0=None, must be refused
    in every spelling.)"""
    try:
        want = canonical(key, call_canonical)
    except ALLOWED:
        with pytest.raises(ALLOWED):
            result_of(call_spelled)
        return
    try:
        got = result_of(call_spelled)
    except ALLOWED as e:
        note(f"refused: {type(e).__name__}")
        msg = str(e)
        assert any(re.search(rf"\b{re.escape(n)}\b", msg) for n in names), (
            f"{type(e).__name__} does not name any of {names}: {msg!r} (spelled: {spelled})")
        return
    assert not any(v is MUST_RAISE for v in says.values()), (
        f"accepted a spelling that says no valid value: {spelled}")
    note("accepted")
    assert fingerprint(got) == want, (
        f"a different answer for {spelled} than for {says}")


# ------------------------------------------------------------------------------------------------
# clnode.solve's keywords


BOOLS = ("constant_step", "force_dtmin", "certify")
FLOATS = {"rtol": (1e-3, 1e-4, 1e-2), "atol": (1e-6, 1e-5), "pcoeff": (0.0, 0.1),
          "icoeff": (1.0, 0.3), "dcoeff": (0.0,), "factormin": (0.2, 0.5),
          "factormax": (10.0, 5.0), "safety": (0.9, 0.8), "dtmin": (None, 1e-6),
          "dtmax": (None, 0.5, 2.0), "t0": (0.0, 0.25), "t1": (1.0, 2.0),
          "dt0": (None, 0.1, 0.05), "certify_fraction": (0.5, 1.0)}
OPTIONAL = ("dtmin", "dtmax", "dt0")
INTS = {"max_steps": (3, 40, 200), "certify_seed": (1, 7)}
CHOICES = {"method": ("tsit5", "dopri5", "bosh3", "dopri8"), "precision": ("fp32", "fp64"),
           "gemm_precision": ("strict",), "precision_guard": ("warn", "off"),
           "device": ("host",)}


@st.composite
def canonical_keywords(draw):
    kw = {k: draw(st.sampled_from(v)) for k, v in FLOATS.items()}
    kw.update({k: draw(st.sampled_from(v)) for k, v in INTS.items()})
    kw.update({k: draw(st.sampled_from(v)) for k, v in CHOICES.items()})
    kw.update({k: draw(st.booleans()) for k in BOOLS})
    kw["certify"] = kw["certify"] and draw(st.integers(0, 3)) == 0  # certify re-solves: rarely
    if kw["constant_step"] and kw["dt0"] is None:
        kw["dt0"] = 0.1
    if kw["dtmin"] is not None and kw["dtmax"] is not None and kw["dtmin"] > kw["dtmax"]:
        kw["dtmin"] = None
    return kw


def spellings_of(key, value):
    if key in BOOLS:
        return bool_spellings(value)
    if key in INTS:
        return int_spellings(value)
    if key in CHOICES:  # device=None: $CLNODE_DEVICE, "host" in these tests (conftest)
        return choice_spellings(value, CHOICES[key], "host" if key == "device" else MUST_RAISE)
    if value is None:
        return [(None, None), (np.array(np.nan), MUST_RAISE), ("None", MUST_RAISE)]
    return float_spellings(value, key in OPTIONAL)


@settings(max_examples=1500, **SETTINGS)
@given(st.data())
def test_solve_keywords(data):
    kw = data.draw(canonical_keywords())
    spelled_keys = data.draw(st.lists(st.sampled_from(sorted(kw)), min_size=1, max_size=3,
                                      unique=True))
    spelled, says = dict(kw), {}
    for key in spelled_keys:
        value, meaning = data.draw(st.sampled_from(spellings_of(key, kw[key])))
        spelled[key] = value
        says[key] = meaning
    canon = dict(kw)
    canon.update({k: v for k, v in says.items() if v is not MUST_RAISE})
    saveat = clnode.SaveAt(t1=True, steps=data.draw(st.booleans()))
    key = ("kw", repr(sorted(canon.items())), saveat.steps)
    check({k: spelled[k] for k in spelled_keys}, spelled_keys, says, key,
          lambda: clnode.solve(PLAIN, Y0, saveat=saveat, **spelled),
          lambda: clnode.solve(PLAIN, Y0, saveat=saveat, **canon))


# ------------------------------------------------------------------------------------------------
# clnode.solve's arrays: y0, per-trajectory t0/t1/dt0, args, SaveAt


@settings(max_examples=1000, **SETTINGS)
@given(st.data())
def test_solve_arrays(data):
    batched = data.draw(st.booleans())
    y0 = Y0B if batched else Y0
    arrays = {"y0": y0, "args": ARGSB if batched else ARGS,
              "ts": np.array([0.25, 0.5, 0.75])}
    if batched:
        arrays.update(t0=np.array([0.0, 0.125]), t1=np.array([1.0, 0.75]),
                      dt0=np.array([0.125, 0.0625]))
    names = data.draw(st.lists(st.sampled_from(sorted(arrays)), min_size=1, max_size=2,
                               unique=True))
    spelled, says = {}, {}
    for name in names:
        value, meaning = data.draw(st.sampled_from(array_spellings(
            arrays[name], extra_axis=(name != "y0" or batched))))
        spelled[name], says[name] = value, meaning
    canon = dict(arrays)
    canon.update({k: v for k, v in says.items() if v is not MUST_RAISE})
    precision = data.draw(st.sampled_from(["fp32", "fp64"]))

    def run(a):
        kw = dict(t0=a.get("t0", 0.0), t1=a.get("t1", 1.0), dt0=a.get("dt0", 0.125),
                  args=a["args"], precision=precision, rtol=1e-4, atol=1e-7)
        try:
            sa = clnode.SaveAt(t0=True, ts=a["ts"], t1=True)
        except ALLOWED:  # the SaveAt itself refused: part of the call
            raise
        return clnode.solve(COND, a["y0"], saveat=sa, **kw)

    key = ("arrays", batched, precision,
           repr({k: np.asarray(v).tobytes() + repr(np.shape(v)).encode()
                 for k, v in sorted(canon.items())}))
    check({k: repr(v)[:80] for k, v in spelled.items()}, names, says, key,
          lambda: run({**arrays, **spelled}), lambda: run(canon))


@settings(max_examples=200, **SETTINGS)
@given(st.data())
def test_saveat_flags(data):
    flags = {"t0": data.draw(st.booleans()), "t1": True, "steps": data.draw(st.booleans())}
    names = data.draw(st.lists(st.sampled_from(sorted(flags)), min_size=1, max_size=3,
                               unique=True))
    spelled, says = dict(flags), {}
    for name in names:
        value, meaning = data.draw(st.sampled_from(bool_spellings(flags[name])))
        spelled[name], says[name] = value, meaning
    canon = dict(flags)
    canon.update({k: v for k, v in says.items() if v is not MUST_RAISE})
    key = ("saveat", repr(sorted(canon.items())))
    check(spelled, names, says, key,
          lambda: clnode.solve(PLAIN, Y0, t0=0.0, t1=1.0, max_steps=50,
                               saveat=clnode.SaveAt(**spelled)),
          lambda: clnode.solve(PLAIN, Y0, t0=0.0, t1=1.0, max_steps=50,
                               saveat=clnode.SaveAt(**canon)))


# ------------------------------------------------------------------------------------------------
# clnode.MLP


@settings(max_examples=600, **SETTINGS)
@given(st.data())
def test_mlp_arguments(data):
    ws = [w for w, _ in LAYERS]
    bs = [b for _, b in LAYERS]
    parts = {"weights[0]": ws[0], "weights[1]": ws[1], "biases[0]": bs[0], "biases[1]": bs[1]}
    names = data.draw(st.lists(st.sampled_from(sorted(parts) + ["time_input", "activation"]),
                               min_size=1, max_size=3, unique=True))
    spelled, says = {}, {}
    for name in names:
        if name == "time_input":
            value, meaning = data.draw(st.sampled_from(bool_spellings(True)))
        elif name == "activation":
            value, meaning = data.draw(st.sampled_from(choice_spellings(
                "softplus", clnode._model.ACTIVATIONS)))
        else:
            value, meaning = data.draw(st.sampled_from(array_spellings(parts[name])))
        spelled[name], says[name] = value, meaning
    canon = {**parts, "time_input": True, "activation": "softplus"}
    canon.update({k: v for k, v in says.items() if v is not MUST_RAISE})
    full = {**parts, "time_input": True, "activation": "softplus", **spelled}

    def build(a):
        return clnode.MLP([a["weights[0]"], a["weights[1]"]], [a["biases[0]"], a["biases[1]"]],
                          activation=a["activation"], time_input=a["time_input"], inputs=K)

    def run(a):
        return clnode.solve(build(a), Y0, t0=0.0, t1=1.0, args=ARGS, rtol=1e-4, atol=1e-7,
                            precision="fp64", saveat=clnode.SaveAt(t0=True, t1=True))

    key = ("mlp", repr({k: (np.asarray(v).tobytes(), np.shape(v)) for k, v in
                        sorted(canon.items())}))
    check({k: repr(v)[:80] for k, v in spelled.items()},
          [n.split("[")[0] for n in names], says, key, lambda: run(full), lambda: run(canon))


def test_the_property_catches_a_coercion(monkeypatch):
    """The fuzzer's property fails on a coercion: constant_step read by truthiness, as the
    package once did."""
    from clnode import _args
    monkeypatch.setattr(_args, "boolean", lambda value, name: bool(value))
    with pytest.raises(AssertionError, match="different answer"):
        check({"constant_step": "False"}, ["constant_step"], {"constant_step": False},
              ("self-test",),
              lambda: clnode.solve(PLAIN, Y0, t0=0.0, t1=1.0, dt0=0.1, constant_step="False"),
              lambda: clnode.solve(PLAIN, Y0, t0=0.0, t1=1.0, dt0=0.1, constant_step=False))
