"""The numpy API: models, solves, save layouts, errors, threads and interruption."""
import json
import logging
import os
import signal
import threading
import time
import warnings

import numpy as np
import pytest

import clnode


def seed_solve(y0, **kw):
    o = dict(t0=0.0, t1=50.0, dt0=0.02, rtol=1e-4, atol=1e-6)
    o.update(kw)
    return clnode.solve(clnode.seed_model(), y0, **o)


# ------------------------------------------------------------------------------------------------
# models

def random_mlp(rng, sizes, act="tanh", fact="identity", bias=True, time_input=False):
    ws = [rng.standard_normal((o, i)) / np.sqrt(i) for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [rng.standard_normal(o) * 0.1 if bias else None for o in sizes[1:]]
    return ws, bs, clnode.MLP(ws, bs, activation=act, final_activation=fact,
                              time_input=time_input)


def test_mlp_from_arrays_properties():
    rng = np.random.default_rng(1)
    ws, bs, m = random_mlp(rng, (4, 7, 3, 4), act="silu", fact="tanh")
    assert m.sizes == (4, 7, 3, 4) and m.dim == 4 and m.num_layers == 3
    assert m.activation == "silu" and m.final_activation == "tanh" and not m.time_input
    for (w, b), w0, b0 in zip(m.layers, ws, bs):
        assert np.array_equal(w, w0) and np.array_equal(b, b0)


def test_mlp_evaluation_is_the_mlp():
    rng = np.random.default_rng(2)
    for act, ref in (("tanh", np.tanh), ("relu", lambda x: np.maximum(x, 0)),
                     ("softplus", lambda x: np.logaddexp(0, x)),
                     ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
                     ("silu", lambda x: x / (1 + np.exp(-x))),
                     ("gelu", lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) *
                                                               (x + 0.044715 * x ** 3))))):
        ws, bs, m = random_mlp(rng, (5, 9, 5), act=act)
        y = rng.standard_normal((6, 5))
        want = ws[1] @ ref(ws[0] @ y.T + bs[0][:, None]) + bs[1][:, None]
        np.testing.assert_allclose(m(y), want.T, rtol=1e-12, atol=1e-12, err_msg=act)
        np.testing.assert_allclose(m(y[0]), want.T[0], rtol=1e-12, atol=1e-12)


def test_time_input_model():
    rng = np.random.default_rng(3)
    ws, bs, m = random_mlp(rng, (4, 6, 3), time_input=True)
    assert m.time_input and m.dim == 3
    y, t = rng.standard_normal((2, 3)), np.array([0.5, 2.0])
    want = (ws[1] @ np.tanh(ws[0] @ np.c_[y, t].T + bs[0][:, None]) + bs[1][:, None]).T
    np.testing.assert_allclose(m(y, t), want, rtol=1e-12)
    with pytest.raises(ValueError, match="time"):
        m(y)
    sol = clnode.solve(m, np.zeros(3), t0=0, t1=1, precision="fp64")
    assert sol.result == clnode.Result.success


def test_round_trips(tmp_path):
    rng = np.random.default_rng(4)
    _, _, m = random_mlp(rng, (3, 5, 3), act="gelu", fact="sigmoid", time_input=False)
    p = tmp_path / "m.safetensors"
    m.save(p)
    assert clnode.MLP.load(p) == m
    assert clnode.MLP.from_bytes(m.to_bytes()) == m
    m32 = clnode.MLP.from_bytes(m.to_bytes("float32"))
    assert m32 != m and np.array_equal(m32.weights[0], m.weights[0].astype(np.float32))
    seed = clnode.seed_model()
    seed.save(tmp_path / "seed.safetensors")
    assert clnode.MLP.load(tmp_path / "seed.safetensors") == seed
    assert clnode.MLP.load(pathlib_seed()) == seed
    _, _, nobias = random_mlp(rng, (3, 4, 3), bias=False)
    assert clnode.MLP.from_bytes(nobias.to_bytes()) == nobias
    assert nobias.biases == [None, None]


def pathlib_seed():
    return os.path.join(os.path.dirname(__file__), "..", "..", "lib", "model", "seed.safetensors")


def test_from_torch_state_dicts():
    rng = np.random.default_rng(5)
    ws, bs, m = random_mlp(rng, (4, 8, 8, 4), act="softplus")
    for prefix in ("", "net.", "func.mlp.layers.", "model.net."):
        sd = {}
        for i, k in enumerate((0, 2, 4)):  # torch numbering: activations leave gaps
            sd[f"{prefix}{k}.weight"] = ws[i]
            sd[f"{prefix}{k}.bias"] = bs[i]
        assert clnode.from_torch(sd, activation="softplus") == m, prefix
    with pytest.raises(ValueError, match="activation"):
        clnode.from_torch({"0.weight": ws[0]})
    with pytest.raises(ValueError, match="prefixes"):
        clnode.from_torch({"a.0.weight": ws[0], "b.1.weight": ws[1]}, activation="tanh")
    with pytest.raises(ValueError, match="Linear layers only"):
        clnode.from_torch({"0.running_mean": ws[0]}, activation="tanh")


class _FakeModule:  # duck-typed torch modules: from_torch never imports torch
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _fake(name, **kw):
    return type(name, (_FakeModule,), {})(**kw)


class Sequential:
    def __init__(self, *mods):
        self.mods = mods

    def children(self):
        return iter(self.mods)


def test_from_torch_sequential_duck_typed():
    rng = np.random.default_rng(6)
    ws, bs, m = random_mlp(rng, (3, 5, 3), act="tanh")
    seq = Sequential(_fake("Linear", weight=ws[0], bias=bs[0]), _fake("Tanh"),
                     _fake("Linear", weight=ws[1], bias=bs[1]))
    assert clnode.from_torch(seq) == m
    bad = Sequential(_fake("Linear", weight=ws[0], bias=bs[0]), _fake("GELU", approximate="none"),
                     _fake("Linear", weight=ws[1], bias=bs[1]))
    with pytest.raises(ValueError, match="approximate"):
        clnode.from_torch(bad)
    bad = Sequential(_fake("Linear", weight=ws[0], bias=bs[0]), _fake("Dropout"))
    with pytest.raises(ValueError, match="Dropout.*supports"):
        clnode.from_torch(bad)
    with pytest.raises(ValueError, match="nn.Sequential or a state_dict"):
        clnode.from_torch(object())


# ------------------------------------------------------------------------------------------------
# solves

def test_seed_problem_and_shapes():
    s = seed_solve(np.zeros(10))
    assert s.stats == {"num_steps": 12, "num_accepted_steps": 12, "num_rejected_steps": 0,
                       "max_steps": 4096, "num_rhs_evals": s.stats["num_rhs_evals"],
                       "first_step": float(np.float32(0.02))}  # the seed's dt0, in fp32
    assert s.result == clnode.Result.success and s.ts.shape == (1,) and s.ys.shape == (1, 10)
    assert s.ys.dtype == np.float32 and s.ts[0] == 50.0
    b = seed_solve(np.zeros((3, 10)), saveat=clnode.SaveAt(steps=True), max_steps=64)
    assert b.ts.shape == (3, 64) and b.ys.shape == (3, 64, 10)
    assert list(b.stats["num_steps"]) == [12, 12, 12] and list(b.result) == [clnode.Result.success] * 3
    # the same bits at every batch size, and diffrax's padding
    assert np.array_equal(b.ys[0, 11], s.ys[0]) and np.array_equal(b.ys[2], b.ys[0])
    assert np.all(np.isinf(b.ts[:, 12:])) and np.all(np.isinf(b.ys[:, 12:]))
    d = seed_solve(np.zeros(10), precision="fp64")
    assert d.ys.dtype == np.float64


def test_save_layout_order():
    ts = np.array([0.5, 1.0, 7.0, 50.0])
    s = seed_solve(np.zeros(10), precision="fp64",
                   saveat=clnode.SaveAt(t0=True, t1=True, ts=ts, steps=True), max_steps=40)
    n = s.stats["num_accepted_steps"]
    T = 1 + len(ts) + 40
    assert s.ts.shape == (T,)
    got = s.ts[:1 + len(ts) + n]
    assert got[0] == 0.0 and np.all(np.diff(got) >= 0)  # t0, then ts and steps in time order
    assert np.all(np.isin(ts, got)) and got[-1] == 50.0
    assert np.all(np.isinf(s.ts[1 + len(ts) + n:]))
    only = seed_solve(np.zeros(10), precision="fp64", saveat=clnode.SaveAt(ts=ts))
    np.testing.assert_array_equal(only.ts, ts)
    for j, t in enumerate(ts):  # a ts point comes before a step that ends at the same time
        np.testing.assert_array_equal(only.ys[j], s.ys[np.nonzero(s.ts == t)[0][0]])


def test_diffrax_reference_oracle(repo):
    """The committed diffrax reference (tests/data/diffrax/seed-fp64.json, made by diffrax 0.7.2
    in float64): the same steps, times and states."""
    ref = json.loads((repo / "tests/data/diffrax/seed-fp64.json").read_text())
    m = clnode.seed_model()
    checked = 0
    for case in ref["cases"]:
        if case["save"] != "steps" or case["batch"] != 2:
            continue
        y0 = np.array([t["y0"] for t in case["trajectories"]], dtype=np.float64)
        s = clnode.solve(m, y0, t0=case["t0"], t1=case["t1"], dt0=case["dt0"],
                         rtol=case["rtol"], atol=case["atol"], method=case["method"],
                         max_steps=case["max_steps"], precision="fp64",
                         saveat=clnode.SaveAt(steps=True))
        for b, tr in enumerate(case["trajectories"]):
            assert s.result[b] == clnode.Result[tr["result"]]
            assert s.stats["num_steps"][b] == tr["num_steps"], case["method"]
            assert s.stats["num_rejected_steps"][b] == tr["num_rejected"]
            n = tr["num_accepted"]
            np.testing.assert_allclose(s.ts[b, :n], tr["ts"], rtol=1e-6)
            np.testing.assert_allclose(s.ys[b, tr["ys_index"]], tr["ys"], rtol=1e-5, atol=1e-7)
            checked += 1
    assert checked >= 20


@pytest.mark.parametrize("kw, match", [
    (dict(rtol=-1.0), "rtol"),
    (dict(dt0=-0.1), "dt0"),
    (dict(method="rk4"), "method"),
    (dict(precision="fp16"), "precision"),
    (dict(gemm_precision="bf16"), "gemm_precision"),
    (dict(saveat=clnode.SaveAt(ts=[60.0])), "save_ts|ts"),
    (dict(method="euler"), "euler"),
    (dict(max_steps=0), "max_steps"),
])
def test_bad_input_raises_value_error(kw, match):
    with pytest.raises(ValueError, match=match) as e:
        seed_solve(np.zeros(10), **kw)
    if isinstance(e.value, clnode.Error):
        assert e.value.status.startswith("CLNODE_ERR_")
        assert str(e.value)  # the library's message


def test_bad_arrays_raise():
    with pytest.raises(ValueError, match="components"):
        seed_solve(np.zeros(9))
    with pytest.raises(ValueError, match="non-finite|finite"):
        seed_solve(np.full(10, np.nan))
    with pytest.raises(ValueError):
        seed_solve(np.zeros((2, 2, 10)))
    with pytest.raises(clnode.ModelError):
        clnode.MLP.from_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    with pytest.raises(clnode.FileError):
        clnode.MLP.load("/nonexistent/model.safetensors")
    with pytest.raises(ValueError, match="layer 1 takes"):
        clnode.MLP([np.ones((3, 2)), np.ones((2, 4))])
    with pytest.raises(clnode.InvalidArgumentError, match="weight"):
        clnode.MLP([np.full((2, 2), np.inf)])
    with pytest.raises(clnode.DeviceError, match="host"):
        clnode.Context("nosuchdevice:7")


@pytest.mark.parametrize("device", ["nosuchdevice:7", "opencl:99", "cuda:99"])
def test_device_errors_are_the_library_message(device, caplog):
    """A context that cannot be made raises the library's error message as its logger gave it
    (logged at DEBUG as "context: MESSAGE"), naming the device: a stray byte of the log record,
    "0", came first."""
    caplog.set_level(logging.DEBUG, logger="clnode")
    with pytest.raises(clnode.Error) as e:
        clnode.Context(device)
    text = str(e.value)
    assert f'"{device}"' in text and not text[0].isdigit(), text
    assert "context: " + text in [r.getMessage() for r in caplog.records], text
    with pytest.raises(TypeError):
        clnode.solve("not a model", np.zeros(3), t0=0, t1=1)


def test_max_steps_result():
    s = seed_solve(np.zeros(10), max_steps=5, saveat=clnode.SaveAt(t1=True))
    assert s.result == clnode.Result.max_steps_reached and s.stats["num_steps"] == 5
    assert s.ts[0] == s.t_final < 50.0  # diffrax saves the final point at t1's slot


def test_precision_guard_warns_and_refuses():
    with pytest.warns(clnode.PrecisionWarning, match="rtol"):
        seed_solve(np.zeros(10), rtol=1e-8, max_steps=50)
    with pytest.raises(clnode.PrecisionError):
        seed_solve(np.zeros(10), rtol=1e-8, precision_guard="refuse")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        seed_solve(np.zeros(10), rtol=1e-8, precision_guard="off", max_steps=50)


def test_precision_warning_by_code_not_wording():
    # the library's code makes the warning: reworded, it still warns; the old wording under
    # another code does not
    codes = clnode._clnode.LOG_CODES
    assert set(codes) >= {"general", "precision_guard", "precision_floor"}
    for name in ("precision_guard", "precision_floor"):
        with pytest.warns(clnode.PrecisionWarning, match="reworded"):
            clnode._log_sink([(1, codes[name], "reworded: no familiar words here")], "solve")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clnode._log_sink([(1, codes["general"], "rtol 1e-9 is below what host resolves; "
                                                "precision_floor")], "solve")
    # end to end: the floor's warning comes with its code (fp32 strict far below 16 u)
    with pytest.warns(clnode.PrecisionWarning) as rec:
        s = seed_solve(np.zeros(10), rtol=1e-9, atol=1e-9, max_steps=100000)
    if s.result == clnode.Result.precision_floor:
        assert any("precision_floor" in str(w.message) for w in rec)


def test_devices_and_probe():
    devs = clnode.devices()
    specs = [d["spec"] for d in devs]
    assert "host" in specs and "host:openblas" in specs
    p = clnode.probe("host")
    assert p["backend"] == "host" and p["facts"]["fp64"] is True
    assert p["gemm"]["fp32/strict"]["gemm_class"] == "fp32"
    assert p["gemm"]["fp32/tf32"]["gemm_class"] == "tf32-like"
    assert p["gemm"]["fp64/strict"]["gemm_class"] == "fp64"
    ctx = clnode.Context("host")
    assert ctx.solve(clnode.seed_model(), np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=1e-4,
                     atol=1e-6).stats["num_steps"] == 12


def _long_problem(dt):
    # constant steps of dt in fp64 (50 / dt steps: 0.002, 25,000 steps, takes about 0.8 s on the
    # 2-core development machine)
    return dict(t0=0.0, t1=50.0, dt0=dt, constant_step=True, precision="fp64",
                max_steps=10 ** 7)


def test_gil_released_two_threads():
    """Two threads, each with its own context, solve at once: their solves overlap in time
    (with the GIL held they could not), and the main thread keeps running meanwhile."""
    m = clnode.seed_model()
    opts = _long_problem(0.005)
    ctxs = [clnode.Context("host"), clnode.Context("host")]
    t = time.perf_counter()
    one = clnode.solve(m, np.zeros(10), context=ctxs[0], **opts)
    single = time.perf_counter() - t
    spans, outs = [None, None], [None, None]

    def work(i):
        a = time.perf_counter()
        outs[i] = clnode.solve(m, np.zeros(10), context=ctxs[i], **opts)
        spans[i] = (a, time.perf_counter())

    ticks = 0
    ths = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    t = time.perf_counter()
    for th in ths:
        th.start()
    while any(th.is_alive() for th in ths):
        ticks += 1
        time.sleep(0.001)
    both = time.perf_counter() - t
    for o in outs:
        assert np.array_equal(o.ys, one.ys)
    overlap = min(spans[0][1], spans[1][1]) - max(spans[0][0], spans[1][0])
    shortest = min(b - a for a, b in spans)
    assert overlap > 0.5 * shortest, (spans, single, both)
    assert ticks > 10  # the main thread ran during the solves
    print(f"one solve {single:.3f} s, two in two threads {both:.3f} s (a busy machine)")


def test_context_busy_in_another_thread():
    m = clnode.seed_model()
    ctx = clnode.Context("host")
    started = threading.Event()
    res = {}

    def long():
        started.set()
        res["sol"] = clnode.solve(m, np.zeros(10), context=ctx, **_long_problem(0.0005))

    th = threading.Thread(target=long)
    th.start()
    started.wait()
    time.sleep(0.05)
    try:
        with pytest.raises(clnode.ContextBusyError):
            clnode.solve(m, np.zeros(10), t0=0, t1=50, context=ctx)
    finally:
        th.join()
    assert res["sol"].result == clnode.Result.success


def _interrupt_after(seconds):
    """A thread, not yet started, that sends this process SIGINT `seconds` after its start. It
    is made before the `pytest.raises` block and started inside it: a signal sent at once may
    interrupt the main thread anywhere after the start, even before an assignment of the
    thread to a name completes."""
    def fire():
        time.sleep(seconds)
        os.kill(os.getpid(), signal.SIGINT)
    return threading.Thread(target=fire)


@pytest.mark.parametrize("delay", [0.0, 0.05])
def test_ctrl_c_interrupts_a_solve(delay):
    """Ctrl-C during a solve of about 25 s on this machine (10^6 fp64 steps; a few ms into it,
    or before its first step group) raises KeyboardInterrupt long before the solve could have
    ended, also on a loaded machine; the context then solves as before."""
    m = clnode.seed_model()
    ctx = clnode.Context("host")
    before = clnode.solve(m, np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=1e-4, atol=1e-6,
                          context=ctx)
    t = time.perf_counter()
    th = _interrupt_after(delay)
    with pytest.raises(KeyboardInterrupt):
        th.start()
        clnode.solve(m, np.zeros(10), context=ctx, **_long_problem(0.00005))
        time.sleep(1)  # a signal that came before the solve began arrives here
    took = time.perf_counter() - t
    th.join()
    assert took < 6.0, took
    after = clnode.solve(m, np.zeros(10), t0=0, t1=50, dt0=0.02, rtol=1e-4, atol=1e-6,
                         context=ctx)
    assert np.array_equal(after.ys, before.ys) and after.stats == before.stats


def test_ctrl_c_handler_restored():
    h = signal.getsignal(signal.SIGINT)
    seed_solve(np.zeros(10))
    assert signal.getsignal(signal.SIGINT) is h


def test_log_goes_to_logging(caplog):
    import logging
    with caplog.at_level(logging.DEBUG, logger="clnode"):
        with pytest.raises(ValueError):  # refused by the solve, which logs it
            seed_solve(np.zeros(10), dt0=-0.02)
    assert any("dt0" in r.getMessage() and "sign" in r.getMessage() for r in caplog.records)


def test_certificate():
    # the certificate of clnode-solve --certify: strict fp32 on the seed problem is within its
    # rounding baseline; emulated TF32 is not (tests/backend/test_sensitivity.c has the same
    # oracles)
    y0 = np.zeros((4, 10))
    o = dict(device="host")
    assert seed_solve(y0, **o).certificate is None
    cert = seed_solve(y0, certify=True, certify_fraction=0.5, certify_seed=3, **o).certificate
    assert cert["certified"] is True and cert["batch"] == 4 and cert["num_sampled"] == 2
    assert len(cert["samples"]) == 2 and all(s["within"] for s in cert["samples"])
    assert cert["max_deviation_rtol"] >= 0
    bad = seed_solve(y0, certify=True, gemm_precision="tf32", precision_guard="off", **o)
    assert bad.certificate["certified"] is False and bad.certificate["num_failed"] >= 1
    assert bad.certificate["max_deviation_rtol"] > 1
    with pytest.raises(ValueError, match="certify_fraction"):
        seed_solve(y0, certify=True, certify_fraction=0.0, **o)
